"""What a reward design is to its callers: one protocol, one scoring method, one record per rollout.

A design has a `name` and `score_group`, which takes the rollouts of one (behavior, seed) and returns one
`RewardRecord` per rollout, in order. A record without a reward says why in its details: ``abstained``
(True when a judge was asked and gave no usable answer, with the judge's ``reason``) or ``not_scored`` (a
reason why no judge was asked). `group_scorer` gives a design's `score_group` the checks every design
shares; `auditrl.testing.check_reward_design` checks the whole contract.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar, cast

from pydantic import BaseModel, Field

from auditrl.judges.cost import attribute_cost
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
    """A reward design: `score_group` scores the rollouts of one (behavior, seed), one record each."""

    name: str

    async def score_group(self, group: Sequence[Transcript]) -> list[RewardRecord]: ...


def check_group(group: Sequence[Transcript]) -> None:
    """A group is the rollouts of one (behavior, seed); anything else is a caller's mistake."""
    keys = {(t.behavior_id, t.seed_id) for t in group}
    if len(keys) > 1:
        raise ValueError(f"a group must share one (behavior, seed); got {sorted(map(str, keys))}")


S = TypeVar("S", bound=Callable[..., Awaitable[list[RewardRecord]]])


def group_scorer(score: S) -> S:
    """Decorate a design's `score_group`: a mixed group is refused, an empty one is `[]` without a judge
    call, and judge calls are counted under the design's name (`auditrl.judges.cost`)."""

    @functools.wraps(score)
    async def checked(self: Any, group: Sequence[Transcript]) -> list[RewardRecord]:
        check_group(group)
        if not group:
            return []
        with attribute_cost(self.name):
            return await score(self, group)

    return cast(S, checked)
