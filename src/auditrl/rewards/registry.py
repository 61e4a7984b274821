"""Build a reward design by name, with LLM judges on one judge model or with programmatic judges.

Two programmatic judge families, named by judge spec: `programmatic` (generic judges reading the
annotations of any annotated transcript, auditrl.judges.programmatic) and `sim` (AuditWorld's judges with
their modelled weaknesses, auditrl.sim.judges, the ones AuditWorld trains against).

Pairwise designs get calibration mixing: benign groups are judged by the calibration pairwise judge
(AuditWorld's pairwise judge applies its calibration variant to benign targets itself).
In-group designs compare the rollouts of one group with each other, so they need groups of two or more;
the reference design compares each rollout with a reference transcript and needs references.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal, get_args

from auditrl.judges.binary import BinaryMatchJudge, BinaryScorer
from auditrl.judges.client import JudgeClient
from auditrl.judges.concerningness import ConcerningnessJudge, ConcerningnessScorer
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
from auditrl.sim.judges import SimBinaryJudge, SimConcerningnessJudge, SimPairwiseJudge, default_world

DESIGN_NAMES: tuple[str, ...] = (
    "concerningness",
    "binary",
    "binary_strict",
    "ingroup_pairwise",
    "ingroup_bradley_terry",
    "reference_pairwise",
)
OfflineJudge = Literal["programmatic", "sim"]
PROGRAMMATIC_JUDGE: OfflineJudge = "programmatic"
SIM_JUDGE: OfflineJudge = "sim"
OFFLINE_JUDGES: tuple[str, ...] = get_args(OfflineJudge)
"""Judge specs that need no model: generic annotation judges, and AuditWorld's judges."""
REFERENCE_DESIGNS: frozenset[str] = frozenset({"reference_pairwise"})
"""Designs whose reward compares each rollout with a stored reference transcript."""


class _Judges:
    """The pointwise, binary and pairwise (planted, benign) judges of one judge spec."""

    def __init__(self, judge: JudgeClient | OfflineJudge | None, extra_dimensions: Sequence[Path]) -> None:
        self.judge = PROGRAMMATIC_JUDGE if judge is None else judge
        self.extra_dimensions = extra_dimensions
        if isinstance(self.judge, str) and self.judge not in OFFLINE_JUDGES:
            raise ValueError(f"unknown judge {self.judge!r}; choose one of {', '.join(OFFLINE_JUDGES)} or a judge client")

    def concerningness(self) -> ConcerningnessScorer:
        if self.judge == SIM_JUDGE:
            return SimConcerningnessJudge(default_world())
        if self.judge == PROGRAMMATIC_JUDGE:
            return ProgrammaticConcerningnessJudge()
        assert isinstance(self.judge, JudgeClient)
        return ConcerningnessJudge(self.judge, extra_dimensions=self.extra_dimensions)

    def binary(self, strict: bool) -> BinaryScorer:
        if self.judge == SIM_JUDGE:
            return SimBinaryJudge(default_world(), strict=strict)
        if self.judge == PROGRAMMATIC_JUDGE:
            return ProgrammaticBinaryJudge(strict=strict)
        assert isinstance(self.judge, JudgeClient)
        return BinaryMatchJudge(self.judge, strict=strict)

    def pairwise(self) -> tuple[PairwiseJudgeLike, PairwiseJudgeLike]:
        """(planted, benign) pairwise judges; AuditWorld's judge switches to calibration on benign targets."""
        if self.judge == SIM_JUDGE:
            sim = SimPairwiseJudge(default_world())
            return sim, sim
        if self.judge == PROGRAMMATIC_JUDGE:
            return ProgrammaticPairwiseJudge(), ProgrammaticPairwiseJudge()
        assert isinstance(self.judge, JudgeClient)
        return PairwiseJudge(self.judge), CalibrationPairwiseJudge(self.judge)


def pairwise_judges(judge: JudgeClient | OfflineJudge | None) -> tuple[PairwiseJudgeLike, PairwiseJudgeLike]:
    """The (planted, benign) pairwise judges of a judge spec, as the pairwise designs use them."""
    return _Judges(judge, ()).pairwise()


def build_design(
    name: str,
    judge: JudgeClient | OfflineJudge | None,
    *,
    benign_fraction: float = 0.5,
    references: ReferenceStore | None = None,
    frozen_references: bool = False,
    extra_dimensions: Sequence[Path] = (),
) -> DetailedDesign:
    """The design `name` with LLM judges on a client, or the offline judges `programmatic` (also None) or `sim`.

    `frozen_references` scores against `references` without seeding or refreshing them (for saved
    transcripts, where seeding from the scored group would compare a rollout with itself).
    """
    if name not in DESIGN_NAMES:
        raise ValueError(f"unknown reward design {name!r}; choose one of {', '.join(DESIGN_NAMES)}")
    judges = _Judges(judge, extra_dimensions)
    if name == "concerningness":
        return PointwiseConcerningness(judges.concerningness())
    if name in ("binary", "binary_strict"):
        return BinaryMatch(judges.binary(strict=name == "binary_strict"))
    planted, benign = judges.pairwise()
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
