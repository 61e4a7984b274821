"""What a reward design is to its callers: one record per rollout, and the protocols designs follow.

A record without a reward says why in its details: ``abstained`` (True when a judge was asked and gave no
usable answer, with the judge's ``reason``) or ``not_scored`` (a reason why no judge was asked).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field

from auditrl.scaffold.transcript import Transcript

ABSTAINED = "abstained"
NOT_SCORED = "not_scored"


class RewardRecord(BaseModel):
    """A rollout's reward (None when its judging failed) with the verdict details that produced it."""

    reward: float | None
    details: dict[str, Any] = Field(default_factory=dict)

    @property
    def not_scored(self) -> str | None:
        """Why no judge was asked about this rollout, or None if one was."""
        reason = self.details.get(NOT_SCORED)
        return str(reason) if reason else None

    @property
    def abstained(self) -> bool:
        """A judge was asked and gave no usable answer."""
        return self.reward is None and self.not_scored is None


def unscored(reason: str, **details: Any) -> RewardRecord:
    """A record for a rollout that no judge was asked about, with the reason."""
    return RewardRecord(reward=None, details={NOT_SCORED: reason, **details})


class RewardDesign(Protocol):
    name: str

    async def score_group(self, group: Sequence[Transcript]) -> list[float | None]: ...


class DetailedDesign(Protocol):
    name: str

    async def score_group(self, group: Sequence[Transcript]) -> list[float | None]: ...

    async def score_group_detailed(self, group: Sequence[Transcript]) -> list[RewardRecord]: ...


def check_group(group: Sequence[Transcript]) -> None:
    """A group is the rollouts of one (behavior, seed); anything else is a caller's mistake."""
    keys = {(t.behavior_id, t.seed_id) for t in group}
    if len(keys) > 1:
        raise ValueError(f"a group must share one (behavior, seed); got {sorted(map(str, keys))}")
