"""Group-relative advantages (GRPO), shared by the language-model trainer and the AuditWorld trainer."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray


def group_advantages(rewards: ArrayLike, scale: bool = True, eps: float = 1e-6) -> NDArray[np.float64]:
    """Advantages for rewards shaped (groups, k): reward minus its group mean, optionally over the group std.

    A NaN reward (a rollout whose judging failed) gets advantage 0 and is left out of its group's
    statistics, so a failed judge call never turns into a learning signal.
    """
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 2:
        raise ValueError(f"rewards must be shaped (groups, k), got shape {r.shape}")
    valid = ~np.isnan(r)
    count = valid.sum(axis=1, keepdims=True)
    filled = np.where(valid, r, 0.0)
    mean = filled.sum(axis=1, keepdims=True) / np.maximum(count, 1)
    adv = np.where(valid, r - mean, 0.0)
    if scale:
        var = (adv**2).sum(axis=1, keepdims=True) / np.maximum(count - 1, 1)
        adv = adv / (np.sqrt(var) + eps)
    return adv


def trl_advantages(rewards: Sequence[float | None], k: int, scale_rewards: str) -> NDArray[np.float64]:
    """Advantages of flat rewards in groups of `k`, scaled as TRL's `scale_rewards` says (`group`: by the group's
    std, `batch`: by the whole batch's, `none`), for an advantage of an extension's own beside TRL's (its
    `advantages` hook, auditrl.train.extensions). A None reward gets advantage 0 and is left out of the statistics."""
    r = np.array([np.nan if v is None else v for v in rewards], dtype=np.float64).reshape(-1, k)
    adv = group_advantages(r, scale=scale_rewards == "group").reshape(-1)
    if scale_rewards == "batch":
        valid = r[~np.isnan(r)]
        adv = adv / ((valid.std(ddof=1) if valid.size > 1 else 0.0) + 1e-4)
    return adv
