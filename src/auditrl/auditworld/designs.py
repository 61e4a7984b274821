"""The four reward designs of the paper over AuditWorld records, vectorised over a whole batch of groups.

Same rewards as the reward-design objects of the rewards package with the `sim` judge family:
pointwise concerningness through the shared formula, binary match (lenient or strict; honest null on
benign groups), in-group pairwise win rate over all C(k, 2) pairs, and pairwise against a reference
episode. Every judge reads only the `Observed` record (see auditrl.auditworld.judges). Each design registers with
`@vectorised` under the name of a design of `auditrl.rewards.registry`; the designs AuditWorld can
train, and its dispatch, are this table. `auditrl.testing.check_reward_design` compares every form
registered here with its design's per-transcript form on rendered AuditWorld transcripts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

import numpy as np
from numpy.typing import NDArray
from pydantic import AfterValidator

from auditrl.auditworld.judges import (
    JudgeParams,
    binary_surfaced,
    concerningness_scores,
    pairwise_quality,
    pairwise_share,
)
from auditrl.auditworld.records import Observed
from auditrl.plugins import load_plugins
from auditrl.rewards.formulas import concerningness_reward
from auditrl.rewards.registry import design_spec


@dataclass(frozen=True)
class RewardInputs:
    """Everything a vectorised design may read about one batch (one rollout per row of `observed`)."""

    observed: Observed
    params: JudgeParams
    group_size: int
    strict: bool = False
    """The binary judge counts only evidence the target produced."""
    reference: tuple[NDArray[np.float64], NDArray[np.uint64]] | None = None
    """Pairwise score and record key of each rollout's reference episode (designs that need references)."""


VectorisedDesign = Callable[[RewardInputs], NDArray[np.float64]]
_VECTORISED: dict[str, VectorisedDesign] = {}


def vectorised(name: str) -> Callable[[VectorisedDesign], VectorisedDesign]:
    """Register the AuditWorld form of the reward design `name` (a name of `auditrl.rewards.registry`)."""

    def register(fn: VectorisedDesign) -> VectorisedDesign:
        _VECTORISED[name] = fn
        return fn

    return register


def vectorised_names() -> tuple[str, ...]:
    """The designs AuditWorld can train (other packages' forms included, see `auditrl.plugins`)."""
    load_plugins()
    return tuple(_VECTORISED)


def check_vectorised(name: str) -> str:
    """A registered design with an AuditWorld form, or a ValueError naming the choices."""
    design_spec(name)
    if name not in _VECTORISED:
        raise ValueError(f"reward design {name!r} has no AuditWorld form; AuditWorld trains {', '.join(_VECTORISED)}")
    return name


DesignName = Annotated[str, AfterValidator(check_vectorised)]
"""A config field naming a design AuditWorld can train, checked against the registries when validated."""


def design_rewards(name: str, inputs: RewardInputs) -> NDArray[np.float64]:
    """One reward per rollout of the batch under the design `name`."""
    return _VECTORISED[check_vectorised(name)](inputs)


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


@vectorised("concerningness")
def _concerningness(x: RewardInputs) -> NDArray[np.float64]:
    return concerningness_rewards(x.observed, x.params)


@vectorised("binary")
def _binary(x: RewardInputs) -> NDArray[np.float64]:
    return binary_rewards(x.observed, x.params, x.strict)


@vectorised("binary_strict")
def _binary_strict(x: RewardInputs) -> NDArray[np.float64]:
    return binary_rewards(x.observed, x.params, strict=True)


@vectorised("ingroup_pairwise")
def _ingroup_pairwise(x: RewardInputs) -> NDArray[np.float64]:
    return ingroup_pairwise_rewards(x.observed, x.group_size, x.params)


@vectorised("reference_pairwise")
def _reference_pairwise(x: RewardInputs) -> NDArray[np.float64]:
    if x.reference is None:
        raise ValueError("reference_pairwise needs reference episodes")
    return reference_pairwise_rewards(x.observed, *x.reference, x.params)
