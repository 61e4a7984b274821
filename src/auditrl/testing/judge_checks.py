"""The contract of a judge family: each kind of judge gives one verdict per input, or abstains with a reason.

- concerningness: every one of the five dimensions scored 1-10, on planted and benign audits;
- binary (lenient and strict): whether the planted behavior was surfaced, on planted audits;
- pairwise (planted, and calibration on benign targets): a result for (a, b) in that order, a's share of
  the win within [0, 1], or both orders abstaining with their reasons.
`check_judge_family` also runs every registered design's contract on the family, since a family exists to
be what designs ask (`auditrl.testing.design_checks`).
"""

from __future__ import annotations

import asyncio
import functools

from auditrl.judges.concerningness import CONCERNINGNESS_DIMENSIONS
from auditrl.judges.registry import resolve_judges
from auditrl.judges.verdicts import BinaryVerdict, DimensionScores, PairwiseResult, PairwiseVerdict
from auditrl.rewards.registry import design_names
from auditrl.scaffold.transcript import Transcript
from auditrl.testing.audits import audit_batches
from auditrl.testing.checks import Check, expect, run_checks
from auditrl.testing.design_checks import FamilySpec, family_label, known_family, reward_design_checks


def _planted() -> list[Transcript]:
    return [t for b in audit_batches() for t in b.planted_groups()[0][:2]]


def _benign() -> list[Transcript]:
    return [t for b in audit_batches() for t in b.benign_groups()[0][:2]]


def check_concerningness(family: FamilySpec) -> None:
    judge = resolve_judges(family).concerningness()
    for t in _planted() + _benign():
        v = asyncio.run(judge.score(t))
        expect(isinstance(v, DimensionScores), f"audit {t.id}: {type(v).__name__} is not DimensionScores")
        if v.abstained:
            expect(bool(v.reason), f"audit {t.id}: abstained without a reason")
            continue
        missing = set(CONCERNINGNESS_DIMENSIONS) - set(v.scores)
        expect(not missing, f"audit {t.id}: dimensions {sorted(missing)} not scored")
        off = {k: s for k, s in v.scores.items() if not 1 <= s <= 10}
        expect(not off, f"audit {t.id}: scores outside 1-10: {off}")


def check_binary(family: FamilySpec) -> None:
    judges = resolve_judges(family)
    for strict in (False, True):
        judge = judges.binary(strict)
        for t in _planted():
            v = asyncio.run(judge.score(t))
            expect(isinstance(v, BinaryVerdict), f"audit {t.id}: {type(v).__name__} is not a BinaryVerdict")
            if v.abstained:
                expect(bool(v.reason), f"audit {t.id} (strict={strict}): abstained without a reason")
            else:
                expect(isinstance(v.surfaced, bool), f"audit {t.id} (strict={strict}): surfaced is {v.surfaced!r}")


def _check_order(v: PairwiseVerdict, what: str) -> None:
    if v.abstained:
        expect(bool(v.reason), f"{what}: an order abstained without a reason")
    else:
        expect(v.winner in ("A", "B"), f"{what}: an answered order names winner {v.winner!r}")


def check_pairwise(family: FamilySpec) -> None:
    judges = resolve_judges(family)
    for calibration, audits in ((False, _planted()), (True, _benign())):
        judge = judges.pairwise(calibration)
        for a, b in zip(audits[::2], audits[1::2], strict=True):
            what = f"{'calibration ' if calibration else ''}comparison of {a.id} with {b.id}"
            r = asyncio.run(judge.compare(a, b))
            expect(isinstance(r, PairwiseResult), f"{what}: {type(r).__name__} is not a PairwiseResult")
            expect((r.a_id, r.b_id) == (a.id, b.id), f"{what}: the result is for ({r.a_id}, {r.b_id})")
            _check_order(r.first, what)
            _check_order(r.second, what)
            if r.share_a is None:
                expect(r.first.abstained and r.second.abstained, f"{what}: no share, but an order answered")
            else:
                expect(0.0 <= r.share_a <= 1.0, f"{what}: share {r.share_a} outside [0, 1]")


def judge_family_checks(family: FamilySpec) -> list[Check]:
    """The contracts of the judges of `family` (a registered name or a JudgeFamily)."""
    known_family(family)
    label = family_label(family)
    return [
        Check(f"{label}: concerningness judge", functools.partial(check_concerningness, family)),
        Check(f"{label}: binary judge", functools.partial(check_binary, family)),
        Check(f"{label}: pairwise judge", functools.partial(check_pairwise, family)),
    ]


def check_judge_family(family: FamilySpec) -> None:
    """Run the family's judge contracts and every registered design's contract on it; raises one
    ContractError naming each that broke."""
    designs = [c for name in design_names() for c in reward_design_checks(name, [family], vectorised=False)]
    run_checks([*judge_family_checks(family), *designs])
