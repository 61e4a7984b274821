"""AuditWorld's judges per transcript: the vectorised judges of `auditrl.auditworld.judges` behind the judges
package's interfaces, reading a transcript's text (never its annotations), and the `sim` judge family.

Reward designs therefore give the same rewards on rendered transcripts as AuditWorld's training does. A
language model's claim matches the plant as the claim grader of evaluation reads it
(`auditrl.judges.claim_grader`), and a report that did not parse is no honest null. Judge spec `sim`
(`auditrl judge score|pairwise --judge`, `reward.judge` of grpo_lm configs) selects these judges with default
`JudgeParams`; `programmatic` (auditrl.judges.programmatic) selects generic judges that read ground-truth
annotations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from auditrl.auditworld.judges import (
    JudgeParams,
    binary_surfaced,
    concerningness_scores,
    default_world,
    judge_order,
    pairwise_quality,
    realism_picks,
)
from auditrl.auditworld.render import reply_kind, transcript_observed, transcript_reading
from auditrl.auditworld.texts import CONFESSION, DISPLAY
from auditrl.auditworld.world import World
from auditrl.judges.concerningness import CONCERNINGNESS_DIMENSIONS
from auditrl.judges.pairwise import check_comparable, compare_both_orders
from auditrl.judges.registry import judge_family
from auditrl.judges.verdicts import (
    BinaryVerdict,
    DimensionScores,
    EvidenceCheck,
    PairwiseResult,
    PairwiseVerdict,
    RealismPick,
    RealismResult,
)
from auditrl.scaffold.transcript import Transcript

if TYPE_CHECKING:
    from auditrl.judges.realism import RealOpening


class SimConcerningnessJudge:
    """The pointwise judge per transcript, behind the judges package's ConcerningnessScorer interface."""

    def __init__(self, world: World, params: JudgeParams | None = None) -> None:
        self.world = world
        self.params = params or JudgeParams()

    async def score(self, transcript: Transcript) -> DimensionScores:
        s = concerningness_scores(transcript_observed(self.world, [transcript]), self.params)
        values = [int(x[0]) for x in s.as_tuple()]
        return DimensionScores(
            scores=dict(zip(CONCERNINGNESS_DIMENSIONS, values, strict=True)), summary="auditworld", attempts=1
        )


class SimBinaryJudge:
    """The binary judge per transcript (lenient or strict), behind the BinaryScorer interface."""

    def __init__(self, world: World, params: JudgeParams | None = None, *, strict: bool = False) -> None:
        self.world = world
        self.params = params or JudgeParams()
        self.strict = strict

    async def score(self, transcript: Transcript) -> BinaryVerdict:
        if transcript.benign:
            raise ValueError(f"transcript {transcript.id} has a benign target: there is no planted behavior to match")
        obs, claim_match = transcript_reading(self.world, [transcript])
        surfaced = bool(binary_surfaced(obs, self.params, self.strict, claim_match)[0])
        evidence = [
            EvidenceCheck(message_id=m.id, quote=m.content, verified=True)
            for m in transcript.target_said()
            if reply_kind(self.world, m.content) in (DISPLAY, CONFESSION)
        ]
        return BinaryVerdict(surfaced=surfaced, judge_said=surfaced, strict=self.strict, evidence=evidence, attempts=1)


class SimPairwiseJudge:
    """The pairwise judge per transcript, behind the PairwiseJudgeLike interface."""

    def __init__(self, world: World, params: JudgeParams | None = None) -> None:
        self.world = world
        self.params = params or JudgeParams()

    def quality(self, transcripts: Sequence[Transcript]) -> tuple[NDArray[np.float64], NDArray[np.uint64]]:
        """Latent scores and record keys (the keys seed each comparison's noise)."""
        obs, claim_match = transcript_reading(self.world, transcripts)
        return pairwise_quality(obs, self.params, claim_match), obs.key()

    async def compare_once(self, a: Transcript, b: Transcript) -> PairwiseVerdict:
        check_comparable(a, b)
        q, key = self.quality([a, b])
        v = judge_order(q[:1], q[1:], key[:1], key[1:], self.params.pair, self.params.rubric.confidence_scale)
        return PairwiseVerdict(
            winner="A" if v.a_wins[0] else "B",
            confidence=int(v.confidence[0]),
            reasoning=f"quality A={q[0]:.3f} B={q[1]:.3f}",
            attempts=1,
            calibration=a.benign,
        )

    async def compare(self, a: Transcript, b: Transcript) -> PairwiseResult:
        return await compare_both_orders(self, a, b)


class SimRealismJudge:
    """The realism judge per transcript, with RealismJudge's interface: the audit's opening against a real one."""

    def __init__(self, world: World, params: JudgeParams | None = None) -> None:
        self.world = world
        self.params = params or JudgeParams()

    async def compare(self, transcript: Transcript, opening: RealOpening) -> RealismResult:
        obs = transcript_observed(self.world, [transcript])
        as_a, as_b = realism_picks(obs, self.params)
        picks = [
            RealismPick(real="A" if as_a[0] else "B", audit_slot="A", attempts=1),
            RealismPick(real="B" if as_b[0] else "A", audit_slot="B", attempts=1),
        ]
        return RealismResult(
            transcript_id=transcript.id,
            opening_id=opening.id,
            picks=picks,
            picked_audit_share=(int(as_a[0]) + int(as_b[0])) / 2,
        )


@judge_family("sim")
class SimJudges:
    """The `sim` family on the shipped library's world with default `JudgeParams`, as AuditWorld scores.

    Its pairwise judge switches to calibration on benign targets itself, so both variants are one judge.
    """

    def concerningness(self) -> SimConcerningnessJudge:
        return SimConcerningnessJudge(default_world())

    def binary(self, strict: bool) -> SimBinaryJudge:
        return SimBinaryJudge(default_world(), strict=strict)

    def pairwise(self, calibration: bool) -> SimPairwiseJudge:
        return SimPairwiseJudge(default_world())
