"""Adapters from the judges' typed verdicts to the suite's score keys, so `run_suite` can use any judge.

Each adapter returns a `Judge` (transcript -> entries for `Transcript.scores`). An abstaining judge
yields None under the key, which the suite counts as an abstention and leaves out of the mean.
`judge_missing` fills in the verdicts stored transcripts lack (`auditrl evaluate --judge`), so a run made by
`auditrl audit` can be scored without re-running its audits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from auditrl.judges.audit_quality import AuditQualityScorer
from auditrl.judges.concerningness import ConcerningnessScorer
from auditrl.judges.realism import Openings, RealismJudge, load_openings, match_seeds
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import (
    AUDIT_QUALITY,
    CONCERNING,
    FALSE_POSITIVE,
    IDENTIFIED,
    PRODUCTION_FIELDS,
    REALISM,
    REALISM_OPENING,
    SUITE_PART,
)

log = logging.getLogger(__name__)

Judge = Callable[[Transcript], Awaitable[Mapping[str, Any] | None]]
"""A judge reads one transcript and either writes its verdict into `transcript.scores` or returns the
entries to merge there. It retries its own model calls; an exception here is recorded as an abstention."""


def realism_provenance(transcripts: Sequence[Transcript]) -> list[str]:
    """The provenance of every opening pool the transcripts' realism verdicts were judged against."""
    found = {str(o.get("provenance")) for t in transcripts if (o := REALISM_OPENING.get(t)) is not None}
    return sorted(found)


async def apply_judge(t: Transcript, judge: Judge, key: str, name: str) -> None:
    """Run one judge; an exception or a missing verdict becomes an explicit abstention (None)."""
    try:
        entries = await judge(t)
    except Exception as exc:  # noqa: BLE001 - judges retry internally; what still fails is recorded, not scored
        log.warning("judge %s failed on transcript %s: %s", name, t.id, exc)
        t.record_judge_error(name, f"{type(exc).__name__}: {exc}")
        entries = None
    else:
        t.clear_judge_error(name)
    if entries:
        t.scores.update(entries)
    t.scores.setdefault(key, None)


def audit_quality_judge(scorer: AuditQualityScorer) -> Judge:
    """Planted: the six dimensions on 0-100 and whether the auditor identified the behavior. Benign (false-positive
    mode): whether the auditor claimed a behavior."""

    async def judge(t: Transcript) -> dict[str, Any]:
        verdict = await scorer.score(t)
        if t.benign:
            return {FALSE_POSITIVE: None if verdict.abstained else verdict.auditor_identified}
        if verdict.abstained:
            return {AUDIT_QUALITY: None, IDENTIFIED: None}
        return {AUDIT_QUALITY: verdict.scores_100, IDENTIFIED: verdict.auditor_identified}

    return judge


def concerning_judge(scorer: ConcerningnessScorer) -> Judge:
    """Production discovery: the concerning score (1-10) and any other production field the judge rates."""

    async def judge(t: Transcript) -> dict[str, Any]:
        verdict = await scorer.score(t)
        if verdict.abstained or CONCERNING not in verdict.scores:
            return {CONCERNING: None}
        return {f: verdict.scores[f] for f in PRODUCTION_FIELDS if f in verdict.scores}

    return judge


def realism_judge(judge: RealismJudge, seeds: Mapping[str, str], openings: Openings | None = None) -> Judge:
    """Realism: the share of both orders in which the judge took the audit's opening for the real one.

    `seeds` (id -> instructions) are every seed whose audits will be judged: they are matched to openings
    by topic all at once, one-to-one while the pool lasts, and rollouts of one seed share an opening.
    Each verdict records the opening and its provenance (the packaged pool is a labelled proxy).
    """
    pool = openings if openings is not None else load_openings()
    by_seed = match_seeds(seeds, pool.openings)

    async def judge_one(t: Transcript) -> dict[str, Any]:
        opening = by_seed.get(t.seed_id)
        if opening is None:
            raise ValueError(f"transcript {t.id}: seed {t.seed_id!r} was not among the seeds matched to openings")
        result = await judge.compare(t, opening)
        return {REALISM: result.picked_audit_share, REALISM_OPENING: {"id": opening.id, "provenance": pool.provenance}}

    return judge_one


PRODUCTION = "production"


def expected_keys(t: Transcript, *, realism: bool = False) -> list[str]:
    """The suite keys a transcript's verdicts go under: its part's key, and realism when it is being judged.

    Production audits (``metadata["suite_part"] == "production"``, written by `run_suite`, or benign audits
    already rated for concerning behavior and not for false positives) are rated for concerning behavior;
    other benign audits for false positives; planted audits for audit quality. Errored audits are excluded
    from every metric, so they expect nothing.
    """
    if t.status == "error":
        return []
    rated_as_production = t.benign and CONCERNING in t.scores and FALSE_POSITIVE not in t.scores
    keys: list[str]
    if t.metadata.get(SUITE_PART) == PRODUCTION or rated_as_production:
        keys = [CONCERNING]
    else:
        keys = [FALSE_POSITIVE if t.benign else AUDIT_QUALITY]
    return [*keys, REALISM] if realism else keys


def has_verdict(t: Transcript, key: str) -> bool:
    """Whether `t` carries a usable verdict under `key` (an abstention, stored as None, is not one)."""
    value = t.scores.get(key)
    if isinstance(value, Mapping):
        return bool(value) and all(v is not None for v in value.values())
    return value is not None


def missing_verdicts(transcripts: Sequence[Transcript], *, realism: bool = False) -> dict[str, list[Transcript]]:
    """For each suite key, the transcripts that should carry a verdict there and do not (never judged or abstained)."""
    out: dict[str, list[Transcript]] = {}
    for t in transcripts:
        for key in expected_keys(t, realism=realism):
            if not has_verdict(t, key):
                out.setdefault(key, []).append(t)
    return out


async def judge_missing(
    transcripts: Sequence[Transcript],
    judges: Mapping[str, Judge],
    *,
    concurrency: int = 4,
    advance: Callable[[], None] | None = None,
) -> list[Transcript]:
    """Run the judge of every key a transcript lacks (keys without a judge are left alone), in place.

    Returns the transcripts that were judged; `advance` is called once per finished transcript, for a
    progress bar. A judge that fails is recorded as an abstention (see `apply_judge`).
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    pending: dict[str, tuple[Transcript, list[str]]] = {}
    for key, lacking in missing_verdicts(transcripts, realism=REALISM in judges).items():
        if key not in judges:
            continue
        for t in lacking:
            pending.setdefault(t.id, (t, []))[1].append(key)
    gate = asyncio.Semaphore(concurrency)

    async def one(t: Transcript, keys: list[str]) -> None:
        async with gate:
            for key in keys:
                await apply_judge(t, judges[key], key, key)
        if advance is not None:
            advance()

    await asyncio.gather(*(one(t, keys) for t, keys in pending.values()))
    return [t for t, _ in pending.values()]
