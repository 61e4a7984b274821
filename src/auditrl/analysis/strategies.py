"""Clustering strategy summaries, naming the clusters, and the archetype of each cluster.

Pipeline (after the paper's contrastive clustering): embed strategy-only texts (`representation`:
MiniLM, tf-idf, or tf-idf with SVD at scale), cluster with MiniBatchKMeans at k ~ n/100, and name each
cluster by its archetype and the words and two-word phrases (never spanning a sentence or clause break)
that most separate up to 50 of its members from the 50 nearest non-members. Every text's archetype
comes from `assignment` (against the codebook alone, so neither the representation nor k changes it);
a cluster's archetype is its members' most common one. `classify` places texts against a codebook
derived from the same corpus (`derivation`), in the clustering space.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from itertools import pairwise
from typing import Literal
from weakref import WeakKeyDictionary

import numpy as np
from pydantic import BaseModel, Field
from rich.markup import escape
from rich.table import Table
from scipy import sparse
from sklearn.cluster import MiniBatchKMeans
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer
from sklearn.preprocessing import normalize

from auditrl.analysis.assignment import (
    DEFAULT_CLASSIFIER,
    Classifier,
    StrategyAssignment,
    archetype_means,
    assign_strategies,
)
from auditrl.analysis.codebook import Codebook, codebook_texts, load_codebook
from auditrl.analysis.representation import Embedded, EmbedderName, embed

CONTRAST_SIZE = 50
NAME_TERMS = 3
KEYWORDS = 6
TEXTS_PER_CLUSTER = 100
_CLAUSE_BREAK = re.compile(r"[.,;:!?()\[\]{}\"/]+|\s[-\u2013\u2014]\s")
_WORD = re.compile(r"[a-z][a-z-]+")


class Cluster(BaseModel):
    """One base cluster, named contrastively."""

    id: int
    size: int
    name: str = Field(description="Its archetype's name, then its most distinguishing words and phrases.")
    keywords: list[str]
    representative: int = Field(description="Index of the member nearest the centroid.")
    representative_text: str
    archetype: str = Field(description="Most common archetype among the members.")


class StrategyClusters(StrategyAssignment):
    """Cluster labels and contrastive names for a list of strategy texts, with each text's archetype."""

    labels: list[int]
    clusters: list[Cluster]
    embedder: Literal["minilm", "tfidf", "lsa"]
    k: int = Field(description="The number of clusters asked for; `clusters` holds the non-empty ones.")
    seed: int

    def title(self) -> str:
        """The clusters' heading: the requested k, and how many clusters were found when fewer."""
        found = len(self.clusters)
        if found == self.k:
            return f"Strategy clusters (k={self.k}, {self.embedder})"
        noun = "cluster" if found == 1 else "clusters"
        return (
            f"Strategy clusters ({found} {noun} found of k={self.k} requested: the summaries are too alike to "
            f"split further; {self.embedder})"
        )

    def clusters_table(self, max_chars: int = 110, max_rows: int = 30) -> Table:
        """The largest clusters (all of them up to `max_rows`), each with its name, category and representative."""
        shown = sorted(self.clusters, key=lambda c: -c.size)[:max_rows]
        more = f"; the {len(shown)} largest of {len(self.clusters)} shown" if len(shown) < len(self.clusters) else ""
        table = Table(title=escape(self.title() + more))
        table.add_column("#", justify="right")
        table.add_column("size", justify="right")
        for col in ("name", "category", "representative"):
            table.add_column(col)
        for c in shown:
            rep = (
                c.representative_text
                if len(c.representative_text) <= max_chars
                else c.representative_text[: max_chars - 3] + "..."
            )
            table.add_row(
                str(c.id), str(c.size), escape(c.name), escape(self.codebook.category_of(c.archetype).name), escape(rep)
            )
        return table


def naming_terms(text: str) -> list[str]:
    """Words and adjacent two-word phrases of `text`, without stop words, never across a clause break.

    Scikit-learn's n-grams drop stop words and punctuation first, which glues words from different
    sentences into phrases nobody wrote ("replies ordinary"); here a phrase is two words that stood
    next to each other in one clause.
    """
    out: list[str] = []
    for clause in _CLAUSE_BREAK.split(re.sub(r"['\u2019]s\b", "", text.lower())):
        out += _clause_terms(clause)
    return out


@lru_cache(maxsize=100_000)
def _clause_terms(clause: str) -> tuple[str, ...]:
    """The words and two-word phrases of one clause (remembered: summaries repeat the same clauses)."""
    words = [(w, w not in ENGLISH_STOP_WORDS) for w in re.split(r"[^a-z-]+", clause) if w]
    singles = [w for w, keep in words if keep and _WORD.fullmatch(w)]
    pairs = [
        f"{a} {b}"
        for (a, keep_a), (b, keep_b) in pairwise(words)
        if keep_a and keep_b and _WORD.fullmatch(a) and _WORD.fullmatch(b)
    ]
    return (*singles, *pairs)


class ContrastiveNamer:
    """Names groups of texts by the terms that separate their members from the nearest non-members.

    Fitted once per corpus of distinct texts; every level of the codebook (base clusters, strategies,
    archetypes, categories) is named the same way: up to 50 members nearest the group's centre against
    the 50 nearest texts outside it.
    """

    def __init__(
        self, texts: Sequence[str], vectors: np.ndarray | sparse.csr_matrix, rows: np.ndarray | None = None
    ) -> None:
        """`vectors` holds a row per text, or with `rows` the distinct rows and each text's row among them."""
        vec = TfidfVectorizer(analyzer=naming_terms, sublinear_tf=True)
        self.matrix = vec.fit_transform(texts).tocsr()
        self.terms = vec.get_feature_names_out()
        self.vectors = vectors
        self.rows = rows
        if isinstance(vectors, np.ndarray):
            self.sq_norms = (vectors**2).sum(axis=1)
        else:
            self.sq_norms = np.asarray(vectors.multiply(vectors).sum(axis=1)).ravel()

    def distances(self, center: np.ndarray) -> np.ndarray:
        """Squared Euclidean distance of every text to `center`."""
        d = self.sq_norms - 2 * np.asarray(self.vectors @ center).ravel() + float(center @ center)
        return d if self.rows is None else d[self.rows]

    def contrast(self, inside: np.ndarray, center: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Indices of the members nearest `center` and of the nearest non-members, up to CONTRAST_SIZE each."""
        d = self.distances(center)
        members = np.flatnonzero(inside)
        members = members[np.argsort(d[members], kind="stable")[:CONTRAST_SIZE]]
        rest = np.flatnonzero(~inside)
        if rest.size > CONTRAST_SIZE:
            rest = rest[np.argpartition(d[rest], CONTRAST_SIZE)[:CONTRAST_SIZE]]
        return members, rest[np.argsort(d[rest], kind="stable")]

    def ranked_terms(self, members: np.ndarray, others: np.ndarray) -> list[str]:
        """Terms whose mean tf-idf is most higher among members than among the nearest non-members, best first."""
        inside = np.asarray(self.matrix[members].mean(axis=0)).ravel()
        outside = np.asarray(self.matrix[others].mean(axis=0)).ravel() if others.size else np.zeros_like(inside)
        diff = inside - outside
        order = np.argsort(-diff, kind="stable")
        return [str(self.terms[i]) for i in order[: KEYWORDS * 4] if diff[i] > 0]


def weighted_centers(
    vectors: np.ndarray | sparse.csr_matrix, labels: np.ndarray, weights: np.ndarray, k: int
) -> np.ndarray:
    """The weighted mean vector of each label 0..k-1 (zeros for an empty label)."""
    member = sparse.csr_matrix((weights, (labels, np.arange(labels.size))), shape=(k, labels.size))
    totals = np.asarray(member.sum(axis=1)).ravel()
    sums = member @ vectors
    sums = sums.toarray() if sparse.issparse(sums) else np.asarray(sums)
    return sums / np.maximum(totals, 1e-12)[:, None]


def fit_kmeans(
    vectors: np.ndarray | sparse.csr_matrix, weights: np.ndarray, k: int, seed: int, n_init: int = 3
) -> MiniBatchKMeans:
    """MiniBatchKMeans on weighted points (distinct vectors weighted by the transcripts they stand for).

    Dense points are fitted in float64: scikit-learn computes float32 distances in float64 chunk by chunk,
    which makes the k-means++ seeding of hundreds of centres several times slower.
    """
    km = MiniBatchKMeans(n_clusters=k, random_state=seed, n_init=n_init, batch_size=max(1024, 3 * k))
    points = vectors if sparse.issparse(vectors) else np.asarray(vectors, dtype=np.float64)
    return km.fit(points, sample_weight=weights)


_NAMERS: WeakKeyDictionary[Embedded, ContrastiveNamer] = WeakKeyDictionary()


def contrastive_namer(emb: Embedded) -> ContrastiveNamer:
    """The namer of `emb`'s distinct texts, fitted once and shared by the clusters and every derived level."""
    namer = _NAMERS.get(emb)
    if namer is None:
        points, point_of = emb.points
        namer = _NAMERS[emb] = ContrastiveNamer(emb.distinct, points, point_of)
    return namer


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


def classify(emb: Embedded, book: Codebook) -> tuple[np.ndarray, np.ndarray]:
    """Best archetype index and the similarity matrix (distinct texts x archetypes) against `book`'s prototypes."""
    book_vectors = emb.vectors_of(codebook_texts(book))
    if emb.embedder == "tfidf":
        # idf already discounts the words every text shares
        prototypes = archetype_means(book, book_vectors)
        sims = np.asarray(emb.vectors @ prototypes.T)
    else:
        # Every summary and codebook text is "an auditor did things to a target", a direction shared by all
        # dense embeddings that makes the most generic archetype the nearest to anything. Measuring from
        # the codebook's mean (fixed, whatever the corpus) leaves the directions that tell archetypes apart.
        center = book_vectors.mean(axis=0)
        prototypes = archetype_means(book, normalize(book_vectors - center))
        sims = np.asarray(normalize(np.asarray(emb.vectors) - center) @ prototypes.T)
    return sims.argmax(axis=1), sims


def cluster_strategies(
    texts: Sequence[str],
    k: int | None = None,
    seed: int = 0,
    embedder: EmbedderName = "minilm",
    codebook: Codebook | None = None,
    embedded: Embedded | None = None,
    classifier: Classifier = DEFAULT_CLASSIFIER,
) -> StrategyClusters:
    """Cluster strategy texts, name the clusters contrastively, and give each text its archetype.

    k defaults to round(n / 100), at least 2 and at most n. The codebook's texts are embedded together
    with `texts`, so both live in one space; pass `embedded` (from `embed(texts, codebook_texts(book))`)
    to reuse vectors already computed. The archetypes are `assign_strategies(texts, codebook, classifier)`:
    the same whatever `embedder` and `k`.
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
    emb = embedded if embedded is not None else embed(texts, codebook_texts(book), embedder, seed)
    vectors = emb.vectors

    # k-means cannot split identical vectors; asking for more clusters than there are only leaves some empty
    points, point_of = emb.points
    fitted = min(k, points.shape[0])
    point_weights = np.bincount(point_of, weights=emb.counts, minlength=points.shape[0])
    if fitted == points.shape[0]:  # a cluster per point: nothing to fit (MiniBatchKMeans may still merge two)
        labels = np.arange(fitted)[point_of]
    else:
        labels = fit_kmeans(points, point_weights, fitted, seed).labels_[point_of]
    centers = weighted_centers(vectors, labels, emb.counts, fitted)

    assigned = assign_strategies(texts, book, classifier, emb)
    per_text = labels[emb.inverse]
    ids = [a.id for a in book.archetypes]
    index = {a: i for i, a in enumerate(ids)}
    archetype_of = np.array([index[a] for a in assigned.archetypes], dtype=np.intp)
    # transcripts per (cluster, archetype); a tie goes to the archetype met first among the cluster's transcripts,
    # as a count in order of appearance would give it
    votes = np.zeros((fitted, len(ids)), dtype=np.int64)
    np.add.at(votes, (per_text, archetype_of), 1)
    first_seen = np.full((fitted, len(ids)), per_text.size, dtype=np.int64)
    np.minimum.at(first_seen, (per_text, archetype_of), np.arange(per_text.size))
    first_text = np.full(emb.counts.size, emb.inverse.size, dtype=np.int64)
    np.minimum.at(first_text, emb.inverse, np.arange(emb.inverse.size))

    namer = contrastive_namer(emb)
    clusters: list[Cluster] = []
    for c in range(fitted):
        inside = labels == c
        if not inside.any():
            continue
        members, others = namer.contrast(inside, centers[c])
        ranked = namer.ranked_terms(members, others)
        rep = int(members[0])
        top = votes[c] == votes[c].max()
        archetype = ids[int(np.flatnonzero(top)[np.argmin(first_seen[c, top])])]
        phrase = ", ".join(name_phrase(ranked))
        archetype_name = book.archetype(archetype).name
        clusters.append(
            Cluster(
                id=c,
                size=int(emb.counts[inside].sum()),
                name=f"{archetype_name}: {phrase}" if phrase else archetype_name,
                keywords=ranked[:KEYWORDS],
                representative=int(first_text[rep]),
                representative_text=emb.distinct[rep],
                archetype=archetype,
            )
        )
    return StrategyClusters(
        **assigned.model_dump(exclude={"codebook"}),
        codebook=book,
        labels=[int(x) for x in per_text],
        clusters=clusters,
        embedder=emb.embedder,
        k=k,
        seed=seed,
    )
