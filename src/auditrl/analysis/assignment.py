"""Strategy archetypes and categories of transcripts: the one assignment every command and report uses.

Each strategy summary is compared with the codebook's texts alone, never with the other summaries of
its run, so a transcript gets the same archetype whichever run, sample or command classifies it (the
AuditWorld report and `auditrl strategies` on the run's saved transcripts agree by construction), and
whatever representation and k its clusters were drawn with.

Two classifiers; a label means something only as far as they agree (`benchmarks/strategy_labels.py`
measures it):
- `lsa` (the default; fast): sublinear tf-idf of the codebook's words and word pairs, reduced by a
  truncated SVD fitted on the codebook's own texts; an archetype's prototype is the mean of its texts
  (a Rocchio classifier: the mean of bags of words is the archetype's vocabulary).
- `minilm`: all-MiniLM-L6-v2 sentence embeddings measured from the codebook's mean vector (the
  direction every "an auditor did things to a target" text shares); an archetype scores by its nearest
  text, because the mean of dense embeddings of a description, exemplars and a keyword list is a blur
  near every summary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, Field
from rich.markup import escape
from rich.table import Table
from sklearn.decomposition import TruncatedSVD
from sklearn.preprocessing import normalize

from auditrl.analysis.choices import DEFAULT_CLASSIFIER, Classifier, Level
from auditrl.analysis.codebook import Codebook, codebook_texts, load_codebook
from auditrl.analysis.representation import LSA_DIMS, Embedded, embed_minilm, tfidf


def shares(items: Sequence[str], groups: Sequence[str], keys: Sequence[str]) -> dict[str, dict[str, float]]:
    """Share of each key among the items of each group (groups in order of appearance, every key present)."""
    if len(groups) != len(items):
        raise ValueError(f"distribution: {len(groups)} groups for {len(items)} texts")
    out: dict[str, dict[str, float]] = {}
    counts: dict[str, Counter[str]] = {}
    for i, g in zip(items, groups, strict=True):
        counts.setdefault(g, Counter())[i] += 1
    for g, c in counts.items():
        total = sum(c.values())
        out[g] = {k: c.get(k, 0) / total for k in keys}
    return out


class StrategyAssignment(BaseModel):
    """The archetype (and so the category) of each strategy summary, against one frozen codebook."""

    archetypes: list[str] = Field(description="Archetype id per text.")
    similarity: list[float] = Field(
        description="Cosine similarity of each text to its archetype, in the classifier's space."
    )
    margin: list[float] = Field(
        description="How far the archetype's similarity is ahead of the runner-up's (0 for a tie)."
    )
    codebook: Codebook
    classifier: Classifier

    def categories(self) -> list[str]:
        """Category id per text."""
        of = {a.id: self.codebook.category_of(a.id).id for a in self.codebook.archetypes}
        return [of[a] for a in self.archetypes]

    def distribution(self, groups: Sequence[str], level: Level = "archetype") -> dict[str, dict[str, float]]:
        """Share of each archetype (or category) within each group; every codebook entry is present."""
        items = self.archetypes if level == "archetype" else self.categories()
        keys = (
            [a.id for a in self.codebook.archetypes]
            if level == "archetype"
            else [c.id for c in self.codebook.categories]
        )
        return shares(items, groups, keys)

    def label_names(self, level: Level = "archetype") -> dict[str, str]:
        if level == "archetype":
            return {a.id: f"{a.number}. {a.name}" for a in self.codebook.archetypes}
        return {c.id: c.name for c in self.codebook.categories}

    def distribution_table(self, groups: Sequence[str], level: Level = "category") -> Table:
        dist = self.distribution(groups, level)
        names = self.label_names(level)
        table = Table(title=f"Strategy {level} shares per group (%; {self.classifier} classifier)")
        table.add_column(level)
        for g in dist:
            table.add_column(escape(g), justify="right")
        for key, name in names.items():
            table.add_row(name, *[f"{100 * dist[g][key]:.0f}" for g in dist])
        return table


def _lsa_scores(texts: Sequence[str], book: Codebook) -> np.ndarray:
    """Similarity of each text to each archetype's mean text, in an LSA space fitted on the codebook alone."""
    vec, matrix = tfidf(codebook_texts(book))
    svd = TruncatedSVD(n_components=max(1, min(LSA_DIMS, matrix.shape[0] - 1, matrix.shape[1] - 1)), random_state=0)
    book_vectors = normalize(svd.fit_transform(matrix))
    counts = vec.transform(texts)
    empty = np.flatnonzero(counts.getnnz(axis=1) == 0)
    if empty.size:
        raise ValueError(
            f"strategy summary at index {empty[:5].tolist()} shares no word with the codebook's texts, so the lsa "
            "classifier cannot place it; use the minilm classifier"
        )
    vectors = normalize(svd.transform(counts))
    return vectors @ archetype_means(book, book_vectors).T


def archetype_means(book: Codebook, book_vectors: np.ndarray) -> np.ndarray:
    """One unit vector per archetype: the normalised mean of its texts' vectors (rows of `codebook_texts`)."""
    bounds = np.cumsum([0, *[len(a.texts()) for a in book.archetypes]])
    return normalize(
        np.stack([book_vectors[bounds[i] : bounds[i + 1]].mean(axis=0) for i in range(len(book.archetypes))])
    )


def _minilm_scores(vectors: np.ndarray, book_vectors: np.ndarray, book: Codebook) -> np.ndarray:
    """Similarity of each text to each archetype's nearest text, both measured from the codebook's mean."""
    center = book_vectors.mean(axis=0)
    sims = normalize(vectors - center) @ normalize(book_vectors - center).T
    bounds = np.cumsum([0, *[len(a.texts()) for a in book.archetypes]])
    return np.stack([sims[:, bounds[i] : bounds[i + 1]].max(axis=1) for i in range(len(book.archetypes))], axis=1)


def assign_strategies(
    summaries: Sequence[str],
    codebook: Codebook | None = None,
    classifier: Classifier = DEFAULT_CLASSIFIER,
    embedded: Embedded | None = None,
) -> StrategyAssignment:
    """The archetype of each strategy summary: the codebook archetype its text is most similar to.

    Depends on nothing but the summary, the codebook and the classifier. `embedded` (MiniLM vectors of
    these summaries with `codebook_texts(codebook)` as extra texts, from clustering) saves embedding
    them twice with the minilm classifier.
    """
    book = codebook or load_codebook()
    blank = [i for i, t in enumerate(summaries) if not t or not t.strip()]
    if blank:
        raise ValueError(f"assign_strategies: empty strategy text at index {blank[:5]}")
    if classifier not in ("lsa", "minilm"):
        raise ValueError(f"unknown strategy classifier {classifier!r} (use lsa or minilm)")
    distinct, inverse = np.unique(np.asarray(list(summaries), dtype=object), return_inverse=True)
    inverse = inverse.ravel()
    texts = [str(t) for t in distinct]
    if classifier == "lsa":
        scores = _lsa_scores(texts, book) if texts else np.zeros((0, len(book.archetypes)))
    elif embedded is not None and embedded.embedder == "minilm" and embedded.extra_texts == codebook_texts(book):
        order = {t: i for i, t in enumerate(embedded.distinct)}
        scores = _minilm_scores(np.asarray(embedded.vectors)[[order[t] for t in texts]], embedded.extra, book)
    else:
        both = embed_minilm([*texts, *codebook_texts(book)])
        scores = _minilm_scores(both[: len(texts)], both[len(texts) :], book)
    ranked = np.sort(scores, axis=1)
    best = scores.argmax(axis=1)
    margin = ranked[:, -1] - ranked[:, -2] if scores.shape[1] > 1 else np.zeros(len(texts))
    ids = [a.id for a in book.archetypes]
    return StrategyAssignment(
        archetypes=[ids[best[i]] for i in inverse],
        similarity=[float(scores[i, best[i]]) for i in inverse],
        margin=[float(margin[i]) for i in inverse],
        codebook=book,
        classifier=classifier,
    )
