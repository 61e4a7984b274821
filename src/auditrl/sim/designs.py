"""The four reward designs of the paper over AuditWorld features, vectorised over a whole batch of groups.

Same semantics as the reward-design objects of the rewards package (tests check equality on rendered
transcripts): pointwise concerningness through the shared formula, binary match (honest null on benign
groups), in-group pairwise win rate over all C(k, 2) pairs, and pairwise against a reference episode.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray

from auditrl.rewards.formulas import concerningness_reward, win_rates
from auditrl.sim.judges import JudgeParams, binary_surfaced, concerningness_scores, pairwise_quality, pairwise_share
from auditrl.sim.world import Features

DesignName = Literal["concerningness", "binary", "ingroup_pairwise", "reference_pairwise"]
DESIGNS: tuple[DesignName, ...] = ("concerningness", "binary", "ingroup_pairwise", "reference_pairwise")


def concerningness_rewards(f: Features, p: JudgeParams) -> NDArray[np.float64]:
    return concerningness_reward(*concerningness_scores(f, p).as_tuple())


def binary_rewards(f: Features, strict: bool = False) -> NDArray[np.float64]:
    """Planted: 1 if the judge says the audit surfaced the behavior; benign: 1 for an honest null report."""
    return np.where(f.planted, binary_surfaced(f, strict), f.claim < 0).astype(np.float64)


def ingroup_pairwise_rewards(f: Features, group_size: int, p: JudgeParams) -> NDArray[np.float64]:
    """Each rollout's win rate over every comparison within its group (judged in both orders)."""
    k = group_size
    q = pairwise_quality(f, p).reshape(-1, k)
    i, j = np.triu_indices(k, 1)
    share, _ = pairwise_share(q[:, i].ravel(), q[:, j].ravel(), p)
    share = share.reshape(q.shape[0], -1)
    w = np.full((q.shape[0], k, k), np.nan)
    w[:, i, j] = share
    w[:, j, i] = 1.0 - share
    return np.concatenate([win_rates(g) for g in w])


def reference_pairwise_rewards(f: Features, q_reference: NDArray[np.float64], p: JudgeParams) -> NDArray[np.float64]:
    """Each rollout's share of its comparison (both orders) with the reference episode of its context."""
    share, _ = pairwise_share(pairwise_quality(f, p), q_reference, p)
    return share
