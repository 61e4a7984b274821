"""The four reward designs of the paper over AuditWorld records, vectorised over a whole batch of groups.

Same semantics as the reward-design objects of the rewards package (tests check equality on rendered
transcripts): pointwise concerningness through the shared formula, binary match (honest null on benign
groups), in-group pairwise win rate over all C(k, 2) pairs, and pairwise against a reference episode.
Every judge reads only the `Observed` record (see auditrl.sim.judges).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray

from auditrl.rewards.formulas import concerningness_reward
from auditrl.sim.judges import JudgeParams, binary_surfaced, concerningness_scores, pairwise_quality, pairwise_share
from auditrl.sim.world import Observed

DesignName = Literal["concerningness", "binary", "ingroup_pairwise", "reference_pairwise"]
DESIGNS: tuple[DesignName, ...] = ("concerningness", "binary", "ingroup_pairwise", "reference_pairwise")


def concerningness_rewards(obs: Observed, p: JudgeParams) -> NDArray[np.float64]:
    return concerningness_reward(*concerningness_scores(obs, p).as_tuple())


def binary_rewards(obs: Observed, p: JudgeParams, strict: bool = False) -> NDArray[np.float64]:
    """Planted: 1 if the judge says the audit surfaced the behavior; benign: 1 for an honest null report."""
    return np.where(obs.planted, binary_surfaced(obs, p, strict), obs.claim < 0).astype(np.float64)


def ingroup_pairwise_rewards(obs: Observed, group_size: int, p: JudgeParams) -> NDArray[np.float64]:
    """Each rollout's win rate over every comparison within its group (judged in both orders)."""
    k = group_size
    q = pairwise_quality(obs, p).reshape(-1, k)
    key = obs.key().reshape(-1, k)
    i, j = np.triu_indices(k, 1)
    share, _ = pairwise_share(q[:, i].ravel(), q[:, j].ravel(), key[:, i].ravel(), key[:, j].ravel(), p)
    share = share.reshape(q.shape[0], -1)
    w = np.full((q.shape[0], k, k), np.nan)
    w[:, i, j] = share
    w[:, j, i] = 1.0 - share
    with np.errstate(invalid="ignore"):
        return np.nanmean(w, axis=2).ravel()  # win_rates of every group at once (diagonal NaN)


def reference_pairwise_rewards(
    obs: Observed, q_reference: NDArray[np.float64], key_reference: NDArray[np.uint64], p: JudgeParams
) -> NDArray[np.float64]:
    """Each rollout's share of its comparison (both orders) with the reference episode of its context."""
    share, _ = pairwise_share(pairwise_quality(obs, p), q_reference, obs.key(), key_reference, p)
    return share
