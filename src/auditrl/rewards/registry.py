"""Build a reward design by name, with LLM judges on one judge model or with programmatic judges.

Pairwise designs get calibration mixing: benign groups are judged by the calibration pairwise judge.
In-group designs compare the rollouts of one group with each other, so they need groups of two or more;
the reference design compares each rollout with a reference transcript and needs references.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from auditrl.judges.binary import BinaryMatchJudge
from auditrl.judges.client import JudgeClient
from auditrl.judges.concerningness import ConcerningnessJudge
from auditrl.judges.pairwise import CalibrationPairwiseJudge, PairwiseJudge, PairwiseJudgeLike
from auditrl.judges.programmatic import ProgrammaticBinaryJudge, ProgrammaticConcerningnessJudge, ProgrammaticPairwiseJudge
from auditrl.rewards.designs import (
    BinaryMatch,
    CalibrationMix,
    DetailedDesign,
    InGroupPairwise,
    PointwiseConcerningness,
    ReferencePairwise,
)
from auditrl.rewards.reference import ReferenceStore

DESIGN_NAMES: tuple[str, ...] = (
    "concerningness",
    "binary",
    "binary_strict",
    "ingroup_pairwise",
    "ingroup_bradley_terry",
    "reference_pairwise",
)
REFERENCE_DESIGNS: frozenset[str] = frozenset({"reference_pairwise"})
"""Designs whose reward compares each rollout with a stored reference transcript."""


def build_design(
    name: str,
    client: JudgeClient | None,
    *,
    benign_fraction: float = 0.5,
    references: ReferenceStore | None = None,
    frozen_references: bool = False,
    extra_dimensions: Sequence[Path] = (),
) -> DetailedDesign:
    """The design `name`; `client=None` uses the programmatic judges (annotated transcripts only).

    `frozen_references` scores against `references` without seeding or refreshing them (for saved
    transcripts, where seeding from the scored group would compare a rollout with itself).
    """
    if name not in DESIGN_NAMES:
        raise ValueError(f"unknown reward design {name!r}; choose one of {', '.join(DESIGN_NAMES)}")
    if name == "concerningness":
        judge = ProgrammaticConcerningnessJudge() if client is None else ConcerningnessJudge(client, extra_dimensions=extra_dimensions)
        return PointwiseConcerningness(judge)
    if name in ("binary", "binary_strict"):
        strict = name == "binary_strict"
        binary = ProgrammaticBinaryJudge(strict=strict) if client is None else BinaryMatchJudge(client, strict=strict)
        return BinaryMatch(binary)
    planted: PairwiseJudgeLike = ProgrammaticPairwiseJudge() if client is None else PairwiseJudge(client)
    benign: PairwiseJudgeLike = ProgrammaticPairwiseJudge() if client is None else CalibrationPairwiseJudge(client)
    if name == "reference_pairwise":
        store = references if references is not None else ReferenceStore()
        return CalibrationMix(
            ReferencePairwise(planted, store, frozen=frozen_references),
            ReferencePairwise(benign, store, frozen=frozen_references),
            benign_fraction=benign_fraction,
        )
    aggregate = "win_rate" if name == "ingroup_pairwise" else "bradley_terry"
    return CalibrationMix(
        InGroupPairwise(planted, aggregate=aggregate), InGroupPairwise(benign, aggregate=aggregate), benign_fraction=benign_fraction
    )
