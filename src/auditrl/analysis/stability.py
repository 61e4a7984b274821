"""How stable a strategy clustering is, and how a derived codebook lines up with the shipped one.

Stability (after Hennig's clusterwise bootstrap): refit the base clustering on bootstrap resamples of
the transcripts, each with its own seed, assign every transcript with the refitted centres, and report
the adjusted Rand index against the original labels and, per original cluster, the best Jaccard
overlap with any refitted cluster (0.75 and up is commonly read as stable, under 0.5 as dissolved).
The silhouette is computed on a random sample of transcripts, as sklearn recommends for large sets.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, Field
from scipy import sparse
from sklearn.metrics import adjusted_mutual_info_score, adjusted_rand_score, pairwise_distances_argmin, silhouette_score

from auditrl.analysis.representation import Embedded
from auditrl.analysis.strategies import fit_kmeans

STABLE_JACCARD = 0.75
DISSOLVED_JACCARD = 0.5
SILHOUETTE_SAMPLE = 5000


class Stability(BaseModel):
    """Silhouettes, bootstrap ARI per seed and the mean bootstrap Jaccard of each base cluster."""

    silhouette: float | None = Field(description="Base clusters, on a sample of transcripts; None with one cluster.")
    silhouette_archetypes: float | None = Field(default=None, description="Derived archetypes, same sample.")
    sample: int
    bootstrap_seeds: list[int]
    bootstrap_ari: list[float]
    jaccard: list[float] = Field(description="Per base cluster (by label), mean over bootstraps of its best Jaccard.")

    def jaccard_summary(self) -> dict[str, float]:
        j = np.asarray(self.jaccard)
        return {
            "mean": float(j.mean()),
            "median": float(np.median(j)),
            "stable": float((j >= STABLE_JACCARD).mean()),
            "dissolved": float((j < DISSOLVED_JACCARD).mean()),
        }

    def rows(self) -> list[tuple[str, str]]:
        """(measure, value) pairs for a table."""
        j = self.jaccard_summary()
        ari = np.asarray(self.bootstrap_ari)

        def fmt(x: float | None) -> str:
            return "-" if x is None else f"{x:.3f}"

        out = [(f"silhouette, base clusters (sample of {self.sample:,})", fmt(self.silhouette))]
        if self.silhouette_archetypes is not None:
            out.append(("silhouette, derived archetypes", fmt(self.silhouette_archetypes)))
        if ari.size:
            out += [
                (
                    f"bootstrap ARI over {ari.size} seeds: mean [min, max]",
                    f"{ari.mean():.3f} [{ari.min():.3f}, {ari.max():.3f}]",
                ),
                ("per-cluster bootstrap Jaccard: mean / median", f"{j['mean']:.3f} / {j['median']:.3f}"),
                (
                    f"clusters stable (Jaccard >= {STABLE_JACCARD}) / dissolved (< {DISSOLVED_JACCARD})",
                    f"{100 * j['stable']:.0f}% / {100 * j['dissolved']:.0f}%",
                ),
            ]
        return out


def _weighted_contingency(a: np.ndarray, b: np.ndarray, weights: np.ndarray) -> sparse.csr_matrix:
    return sparse.csr_matrix((weights, (a, b)), shape=(int(a.max()) + 1, int(b.max()) + 1))


def best_jaccard(reference: np.ndarray, other: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """For each reference label, the largest Jaccard overlap with any label of `other` (points weighted)."""
    table = _weighted_contingency(reference, other, weights).tocoo()
    size_a = np.bincount(reference, weights=weights)
    size_b = np.bincount(other, weights=weights)
    jac = table.data / (size_a[table.row] + size_b[table.col] - table.data)
    best = np.zeros(size_a.size)
    np.maximum.at(best, table.row, jac)
    return best


def stability(
    emb: Embedded,
    labels: np.ndarray,
    archetype_labels: np.ndarray | None = None,
    bootstraps: int = 3,
    seed: int = 0,
    sample: int = SILHOUETTE_SAMPLE,
) -> Stability:
    """Stability of base `labels` (one per distinct text of `emb`) over `bootstraps` resampled refits."""
    rng = np.random.default_rng(seed)
    n = emb.inverse.size
    picked = emb.inverse[rng.choice(n, size=min(sample, n), replace=False)]
    points = emb.vectors[picked]

    def silhouette(lab: np.ndarray) -> float | None:
        return float(silhouette_score(points, lab[picked])) if len(set(lab[picked].tolist())) > 1 else None

    k = int(labels.max()) + 1
    seeds = [seed + 1 + b for b in range(bootstraps)]
    ari: list[float] = []
    jaccards: list[np.ndarray] = []
    vectors, vector_of = emb.points
    for s in seeds:
        draw = np.random.default_rng(s).integers(0, n, size=n)
        weights = np.bincount(vector_of[emb.inverse[draw]], minlength=vectors.shape[0]).astype(np.float64)
        present = np.flatnonzero(weights > 0)
        dense = vectors if sparse.issparse(vectors) else np.asarray(vectors, dtype=np.float64)
        if k >= present.size:  # a cluster per drawn point: each point joins the nearest drawn one
            refit = pairwise_distances_argmin(dense, dense[present])[vector_of]
        else:
            refit = fit_kmeans(vectors[present], weights[present], k, s, n_init=1).predict(dense)[vector_of]
        ari.append(float(adjusted_rand_score(labels[emb.inverse], refit[emb.inverse])))
        jaccards.append(best_jaccard(labels, refit, emb.counts))
    return Stability(
        silhouette=silhouette(labels),
        silhouette_archetypes=silhouette(archetype_labels) if archetype_labels is not None else None,
        sample=int(picked.size),
        bootstrap_seeds=seeds,
        bootstrap_ari=ari,
        jaccard=np.mean(jaccards, axis=0).tolist() if jaccards else [],
    )


class CodebookComparison(BaseModel):
    """Agreement between two classifications of the same transcripts (derived vs shipped codebook)."""

    archetype_ari: float
    archetype_ami: float
    category_ari: float
    rows: list[tuple[str, int, str, float]] = Field(
        description="Per derived archetype: name, transcripts, the shipped archetype most of them fall in, and that "
        "share."
    )


def compare_codebooks(
    derived: Sequence[str],
    shipped: Sequence[str],
    derived_categories: Sequence[str],
    shipped_categories: Sequence[str],
    derived_names: dict[str, str],
    shipped_names: dict[str, str],
) -> CodebookComparison:
    """ARI and AMI of the two archetype labelings (and ARI of categories), and where each derived archetype lands."""
    rows = []
    d, s = np.asarray(derived), np.asarray(shipped)
    for key, name in derived_names.items():
        mine = s[d == key]
        if mine.size == 0:
            continue
        values, counts = np.unique(mine, return_counts=True)
        top = int(counts.argmax())
        rows.append((name, int(mine.size), shipped_names[str(values[top])], float(counts[top] / mine.size)))
    return CodebookComparison(
        archetype_ari=float(adjusted_rand_score(d, s)),
        archetype_ami=float(adjusted_mutual_info_score(d, s)),
        category_ari=float(adjusted_rand_score(derived_categories, shipped_categories)),
        rows=rows,
    )
