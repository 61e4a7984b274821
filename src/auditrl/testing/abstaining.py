"""A judge family that abstains about chosen transcripts: what the abstention contract feeds a design.

It wraps another family: about a chosen transcript every judge answers "no usable answer" with `REASON`
(as a model judge does when its replies never parse), about any other it answers as the wrapped family
does. It remembers which transcripts it was asked about, so a check can tell a design that asked and got
an abstention from one that asks no judge about a rollout.
"""

from __future__ import annotations

from collections.abc import Collection

from auditrl.judges.binary import BinaryScorer
from auditrl.judges.concerningness import ConcerningnessScorer
from auditrl.judges.pairwise import PairwiseJudgeLike, combine_orders
from auditrl.judges.registry import JudgeFamily
from auditrl.judges.verdicts import BinaryVerdict, DimensionScores, PairwiseResult, PairwiseVerdict
from auditrl.scaffold.transcript import Transcript

REASON = "the contract check's judge abstained on purpose"


class AbstainingJudges:
    """`inner`'s judges, abstaining with `REASON` about the transcripts whose ids are in `ids`."""

    def __init__(self, inner: JudgeFamily, ids: Collection[str]) -> None:
        self.inner = inner
        self.ids = set(ids)
        self.asked: set[str] = set()
        """Ids of every transcript a judge of this family was asked about."""

    def concerningness(self) -> ConcerningnessScorer:
        return _Concerningness(self, self.inner.concerningness())

    def binary(self, strict: bool) -> BinaryScorer:
        return _Binary(self, self.inner.binary(strict))

    def pairwise(self, calibration: bool) -> PairwiseJudgeLike:
        return _Pairwise(self, self.inner.pairwise(calibration))

    def abstains(self, *transcripts: Transcript) -> bool:
        """Note that these transcripts were asked about; True when the judge abstains about any of them."""
        ids = {t.id for t in transcripts}
        self.asked |= ids
        return bool(ids & self.ids)


class _Concerningness:
    def __init__(self, family: AbstainingJudges, inner: ConcerningnessScorer) -> None:
        self.family, self.inner = family, inner

    async def score(self, transcript: Transcript) -> DimensionScores:
        if self.family.abstains(transcript):
            return DimensionScores(abstained=True, reason=REASON)
        return await self.inner.score(transcript)


class _Binary:
    def __init__(self, family: AbstainingJudges, inner: BinaryScorer) -> None:
        self.family, self.inner = family, inner
        self.strict = inner.strict

    async def score(self, transcript: Transcript) -> BinaryVerdict:
        if self.family.abstains(transcript):
            return BinaryVerdict(abstained=True, reason=REASON, strict=self.strict)
        return await self.inner.score(transcript)


class _Pairwise:
    def __init__(self, family: AbstainingJudges, inner: PairwiseJudgeLike) -> None:
        self.family, self.inner = family, inner

    async def compare_once(self, a: Transcript, b: Transcript) -> PairwiseVerdict:
        if self.family.abstains(a, b):
            return PairwiseVerdict(abstained=True, reason=REASON)
        return await self.inner.compare_once(a, b)

    async def compare(self, a: Transcript, b: Transcript) -> PairwiseResult:
        if self.family.abstains(a, b):
            verdict = PairwiseVerdict(abstained=True, reason=REASON)
            return combine_orders(a.id, b.id, verdict, verdict)
        return await self.inner.compare(a, b)
