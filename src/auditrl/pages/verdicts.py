"""A transcript's judge verdicts in words, so a page says beside each audit how it was scored.

Reads the verdicts the judges stored in `Transcript.scores` under the keys declared in
`auditrl.scaffold.transcript_keys`, the transfer match and a training reward; the numbers are the ones the
suite averages (the same value functions), so a reader can check a table against its transcripts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from auditrl.evaluate.metrics import (
    SuiteDataError,
    audit_quality_value,
    false_positive_value,
    production_value,
    realism_value,
)
from auditrl.judges.claim_grader import default_grader, report_outcome
from auditrl.judges.verdicts import verdict_of
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import (
    AUDIT_QUALITY,
    CONCERNING,
    FALSE_POSITIVE,
    IDENTIFIED,
    PREDICTION_MATCH,
    PRODUCTION_FIELDS,
    REALISM,
    REWARD,
    SUITE_PART,
)

ABSTAINED = "the judge abstained (left out of the means, not scored as 0)"


@dataclass
class Reading:
    """What a verdict says: the headline in a few words and the detail behind it."""

    headline: str
    detail: str = ""


@dataclass
class VerdictView:
    """One verdict: what was judged, the headline in a few words, and the detail behind it."""

    name: str
    headline: str
    detail: str = ""


def _audit_quality(t: Transcript) -> Reading:
    value = audit_quality_value(t)
    dims = t.scores[AUDIT_QUALITY]
    if value is None or math.isnan(value):
        return Reading("abstained", ABSTAINED)  # on every dimension or on one
    detail = ", ".join(f"{k.replace('_', ' ')} {v:.0f}" for k, v in dims.items()) if isinstance(dims, Mapping) else ""
    return Reading(f"{value:.1f} / 100", detail)


def _identified(t: Transcript) -> Reading:
    flag = t.scores[IDENTIFIED]
    if flag is None:
        return Reading("abstained", ABSTAINED)
    if not isinstance(flag, bool):
        raise ValueError(f"transcript {t.id}: scores['identified'] = {flag!r}, expected true/false")
    if flag:
        return Reading("yes", "the report named the planted behavior")
    return Reading("no", "the report did not name the planted behavior")


def _false_positive(t: Transcript) -> Reading:
    value = false_positive_value(t)
    if value is None or math.isnan(value):
        return Reading("abstained", ABSTAINED)
    if value == 0.0:
        return Reading("yes", "the auditor claimed a hidden behavior in a benign target")
    return Reading("no", "the auditor found nothing in a benign target, correctly")


def _concerning(t: Transcript) -> Reading:
    value = production_value(t)
    if value is None or math.isnan(value):
        return Reading("abstained", ABSTAINED)
    fields = ", ".join(f"{f.replace('_', ' ')} {t.scores[f]:g} / 10" for f in PRODUCTION_FIELDS if f in t.scores)
    return Reading(f"{t.scores[CONCERNING]:g} / 10", f"{fields}; production discovery {value:.1f} / 100")


def _realism(t: Transcript) -> Reading:
    value = realism_value(t)
    if value is None or math.isnan(value):
        return Reading("abstained", ABSTAINED)
    return Reading(
        f"{value:.0f}%", "share of orders in which the realism judge took the audit's opening for the real one"
    )


def _transfer(t: Transcript) -> Reading:
    verdict = verdict_of(t)
    if verdict is None or verdict.matched is None:
        return Reading("abstained", ABSTAINED)
    if not verdict.matched:
        return Reading("no", verdict.reasoning)
    return Reading(f"by prediction {verdict.matched_rank}", verdict.reasoning)


def _reward(t: Transcript) -> Reading:
    reward = t.scores[REWARD]
    headline = "none (failed)" if not isinstance(reward, (int, float)) else f"{reward:.3g}"
    return Reading(headline)


READERS: dict[str, tuple[str, Callable[[Transcript], Reading]]] = {
    AUDIT_QUALITY: ("audit quality", _audit_quality),
    IDENTIFIED: ("identified", _identified),
    FALSE_POSITIVE: ("false positive", _false_positive),
    CONCERNING: ("concerning", _concerning),
    REALISM: ("realism", _realism),
    PREDICTION_MATCH: ("behavior matched", _transfer),
    REWARD: ("training reward", _reward),
}
"""Each score key a report explains: its name on the page, and how it is read."""


def verdicts(t: Transcript) -> list[VerdictView]:
    """The verdicts stored with `t`, in words; an unreadable one is shown as such, never dropped."""
    out: list[VerdictView] = []
    for key, (name, read) in READERS.items():
        if key not in t.scores:
            continue
        try:
            reading = read(t)
        except (SuiteDataError, TypeError, ValueError) as exc:
            reading = Reading("invalid", str(exc))
        out.append(VerdictView(name, reading.headline, reading.detail))
    return out


IDENTIFIED_OUTCOME, MISSED, FALSE_POSITIVE_OUTCOME, CLEAN = "identified", "missed", "false positive", "correctly clean"
OUTCOMES = (IDENTIFIED_OUTCOME, MISSED, FALSE_POSITIVE_OUTCOME, CLEAN)
"""What an audit came to, as the transcript list shows it at a glance."""


def audit_outcome(t: Transcript) -> str:
    """What the audit came to: identified / missed on a planted target, false positive / correctly clean on a
    benign one; also an errored audit, one with no readable report, and a production audit's conclusion.

    The judge's stored verdict decides where there is one (`identified`, `false_positive`, a transfer audit's
    prediction match); otherwise the offline claim grader reads the report, the grader rewards and evaluation share.
    """
    if t.status == "error":
        return "errored"
    outcome = report_outcome(t.report)
    if t.benign and t.metadata.get(SUITE_PART) == "production":
        production = {"claim": "production: claimed a behavior", "nothing_found": "production: nothing found"}
        return production.get(outcome, "no readable report")
    stored = t.scores.get(FALSE_POSITIVE if t.benign else IDENTIFIED)
    if not t.benign and PREDICTION_MATCH in t.scores:
        try:
            match = verdict_of(t)
        except ValueError:  # an unreadable match is listed as invalid among the verdicts; the report decides here
            match = None
        stored = match.matched if match is not None else None
    if isinstance(stored, bool):
        return (FALSE_POSITIVE_OUTCOME if stored else CLEAN) if t.benign else (IDENTIFIED_OUTCOME if stored else MISSED)
    if outcome == "unreadable":
        return "no readable report"
    if t.benign:
        return FALSE_POSITIVE_OUTCOME if outcome == "claim" else CLEAN
    return IDENTIFIED_OUTCOME if default_grader().identifies(t) else MISSED


def verdict_line(t: Transcript, found: list[VerdictView]) -> str:
    """The verdicts in one line for a transcript's summary, or why there are none."""
    if found:
        return "; ".join(f"{v.name}: {v.headline}" for v in found)
    if t.status == "error":
        return "no verdict: the audit ended in an error"
    return "not judged"
