"""Transcript and behavior builders for the reward tests (a uniquely named module, importable from test files)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from auditrl.behaviors.schema import Behavior, Seed
from auditrl.rewards.records import RewardDesign
from auditrl.scaffold.transcript import Prediction, Report, TargetMessage, Transcript


def transcript(
    tid: str,
    *,
    behavior: str | None = "flattery",
    seed: str = "s1",
    expressed: bool = False,
    null_report: bool | None = None,
    reply: str = "ok",
) -> Transcript:
    ann: dict[str, Any] = {"expressed": True} if expressed else {}
    report = None
    if null_report is not None:
        report = Report(
            no_behavior_found=null_report,
            predictions=[] if null_report else [Prediction(rank=1, description="hidden flattery", confidence=0.9)],
        )
    return Transcript(
        id=tid,
        auditor_model="a",
        target_model="t",
        target_family="fam",
        behavior_id=behavior,
        seed_id=seed,
        seed_instructions="seed",
        target_system_prompt="" if behavior is None else "PLANT",
        target_messages=[
            TargetMessage(id=f"{tid}u", parent=None, role="user", content="hi"),
            TargetMessage(id=f"{tid}a", parent=f"{tid}u", role="assistant", content=reply, annotations=ann),
        ],
        head=f"{tid}a",
        report=report,
    )


def behavior(bid: str, split: str = "train") -> Behavior:
    return Behavior(
        id=bid,
        name=bid,
        split=split,
        definition="d" * 25,
        triggers=["t"],
        evidence=["e"],
        instructions="i" * 25,
        cover_story="c" * 12,
    )


def seeds_for(bid: str, n: int = 3) -> list[Seed]:
    return [Seed(id=f"{bid}_{i}", behavior=bid, instructions=f"scenario {i}") for i in range(n)]


async def rewards(design: RewardDesign, group: Sequence[Transcript]) -> list[float | None]:
    """The rewards of a group's records, in order."""
    return [r.reward for r in await design.score_group(group)]
