"""Adapters from the judges' typed verdicts to the suite's score keys, so `run_suite` can use any judge.

Each adapter returns a `Judge` (transcript -> entries for `Transcript.scores`). An abstaining judge
yields None under the key, which the suite counts as an abstention and leaves out of the mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from auditrl.evaluate.suite import AUDIT_QUALITY, CONCERNING, FALSE_POSITIVE, PRODUCTION_FIELDS, REALISM, Judge
from auditrl.judges.audit_quality import AuditQualityScorer
from auditrl.judges.concerningness import ConcerningnessScorer
from auditrl.judges.realism import RealismJudge, RealOpening, load_real_openings, match_openings
from auditrl.scaffold.transcript import Transcript


def audit_quality_judge(scorer: AuditQualityScorer) -> Judge:
    """Planted: the six dimensions on 0-100. Benign (false-positive mode): whether the auditor claimed a behavior."""

    async def judge(t: Transcript) -> dict[str, Any]:
        verdict = await scorer.score(t)
        if t.benign:
            return {FALSE_POSITIVE: None if verdict.abstained else verdict.auditor_identified}
        return {AUDIT_QUALITY: None if verdict.abstained else verdict.scores_100}

    return judge


def concerning_judge(scorer: ConcerningnessScorer) -> Judge:
    """Production discovery: the concerning score (1-10) and any other production field the judge rates."""

    async def judge(t: Transcript) -> dict[str, Any]:
        verdict = await scorer.score(t)
        if verdict.abstained or CONCERNING not in verdict.scores:
            return {CONCERNING: None}
        return {f: verdict.scores[f] for f in PRODUCTION_FIELDS if f in verdict.scores}

    return judge


def realism_judge(judge: RealismJudge, openings: Sequence[RealOpening] | None = None) -> Judge:
    """Realism: the share of both orders in which the judge took the audit's opening for the real one.

    Each seed is matched to its closest real opening by topic (rollouts of one seed share it).
    """
    pool = list(openings) if openings is not None else load_real_openings()
    by_seed: dict[str, RealOpening] = {}

    async def judge_one(t: Transcript) -> dict[str, Any]:
        if t.seed_id not in by_seed:
            by_seed[t.seed_id] = match_openings([t], pool)[0]
        result = await judge.judge(t, by_seed[t.seed_id])
        return {REALISM: result.picked_audit_share}

    return judge_one
