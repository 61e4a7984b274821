"""The contract of a registered reward design, checked as scikit-learn's `check_estimator` checks an estimator.

On every judge family (the registered ones unless told otherwise), a design built by the registry must:
- score an empty group as `[]` without asking a judge;
- give one `RewardRecord` per rollout, a finite reward or None with a reason, and score something;
- pass on a judge's abstention: the rollout it abstained about gets None with the judge's reason, and no
  other rollout loses its reward;
- refuse a group that mixes (behavior, seed) with a ValueError.
A design with an AuditWorld form (`auditrl.auditworld.designs`) must also give, with the `sim` family, exactly the
rewards its vectorised form gives on the same batch, rendered transcripts against `Observed` records.
The audits are rendered AuditWorld batches (`auditrl.testing.audits`).
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Sequence

import numpy as np

from auditrl.auditworld.designs import RewardInputs, design_rewards, vectorised_names
from auditrl.auditworld.judges import JudgeParams
from auditrl.judges.registry import JudgeFamily, judge_family_names, resolve_judges
from auditrl.rewards.records import RewardRecord
from auditrl.rewards.reference import ReferenceStore
from auditrl.rewards.registry import build_design, design_spec
from auditrl.scaffold.transcript import Transcript
from auditrl.testing.abstaining import REASON, AbstainingJudges
from auditrl.testing.audits import audit_batch, audit_batches
from auditrl.testing.checks import Check, ContractError, expect, run_checks

FamilySpec = str | JudgeFamily
SHOWN = 3
"""Mismatching rollouts a failure lists."""


def family_label(family: FamilySpec) -> str:
    return family if isinstance(family, str) else type(family).__name__


def known_family(family: FamilySpec) -> FamilySpec:
    """A registered family name or a JudgeFamily; a model spec would call a model, so it is refused."""
    if isinstance(family, str) and family not in judge_family_names():
        raise ValueError(f"unknown judge family {family!r}; registered: {', '.join(judge_family_names())}")
    return family


def _score(
    name: str, family: FamilySpec, groups: Sequence[Sequence[Transcript]], references: ReferenceStore
) -> list[list[RewardRecord]]:
    design = build_design(name, family, references=references)

    async def every() -> list[list[RewardRecord]]:
        return [await design.score_group(list(g)) for g in groups]

    return asyncio.run(every())


def _check_records(records: object, group: Sequence[Transcript]) -> list[RewardRecord]:
    expect(isinstance(records, list), f"score_group returned {type(records).__name__}, not a list of RewardRecord")
    assert isinstance(records, list)
    expect(len(records) == len(group), f"{len(records)} records for a group of {len(group)} rollouts")
    for t, r in zip(group, records, strict=True):
        expect(isinstance(r, RewardRecord), f"rollout {t.id}: {type(r).__name__} is not a RewardRecord")
        if r.reward is None:
            expect(
                bool(r.not_scored) or bool(r.details.get("reason")),
                f"rollout {t.id}: no reward and no reason ({r.details})",
            )
        else:
            expect(
                isinstance(r.reward, float) and math.isfinite(r.reward),
                f"rollout {t.id}: reward {r.reward!r} is not finite",
            )
    return records


def check_empty_group(name: str, family: FamilySpec) -> None:
    judges = AbstainingJudges(resolve_judges(family), ())
    (records,) = _score(name, judges, [[]], ReferenceStore())
    expect(records == [], f"an empty group gave {records!r}, not []")
    expect(not judges.asked, f"an empty group asked a judge about {sorted(judges.asked)}")


def check_records(name: str, family: FamilySpec) -> None:
    batch = audit_batch(0)
    groups = batch.planted_groups()[:2] + batch.benign_groups()[:2]
    scored = _score(name, family, groups, batch.reference_store())
    records = [r for g, rs in zip(groups, scored, strict=True) for r in _check_records(rs, g)]
    expect(any(r.reward is not None for r in records), f"no rollout of {len(groups)} groups was given a reward")


def check_abstention(name: str, family: FamilySpec) -> None:
    batch = audit_batch(0)
    for group in (batch.planted_groups()[0], batch.benign_groups()[0]):
        (plain,) = _score(name, family, [group], batch.reference_store())
        judges = AbstainingJudges(resolve_judges(family), [group[-1].id])
        (records,) = _score(name, judges, [group], batch.reference_store())
        _check_records(records, group)
        if group[-1].id in judges.asked:
            last = records[-1]
            expect(
                last.reward is None and last.abstained and REASON in str(last.details.get("reason", "")),
                f"rollout {group[-1].id}: the judge abstained about it, but its record is {last}",
            )
        for t, before, after in zip(group[:-1], plain[:-1], records[:-1], strict=True):
            expect(
                before.reward is None or after.reward is not None,
                f"rollout {t.id} lost its reward ({before.reward}) because the judge abstained about {group[-1].id}",
            )


def check_mixed_group(name: str, family: FamilySpec) -> None:
    batch = audit_batch(0)
    first = batch.transcripts[0]
    other = next(t for t in batch.transcripts if (t.behavior_id, t.seed_id) != (first.behavior_id, first.seed_id))
    try:
        _score(name, family, [[first, other]], batch.reference_store())
    except ValueError:
        return
    raise ContractError(
        f"a group mixing ({first.behavior_id}, {first.seed_id}) and ({other.behavior_id}, {other.seed_id}) was scored, "
        "not refused with a ValueError (decorate score_group with auditrl.rewards.records.group_scorer)"
    )


def check_vectorised_form(name: str) -> None:
    """The per-transcript form with the `sim` family and the AuditWorld form agree on every rollout."""
    needs_references = design_spec(name).references
    for batch in audit_batches():
        reference = batch.reference_scores() if needs_references else None
        want = design_rewards(name, RewardInputs(batch.observed, JudgeParams(), batch.group_size, reference=reference))
        groups = batch.groups()
        got = [
            r.reward
            for g, rs in zip(groups, _score(name, "sim", groups, batch.reference_store()), strict=True)
            for r in _check_records(rs, g)
        ]
        expect(
            np.shape(want) == (len(got),), f"the vectorised form gave shape {np.shape(want)} for {len(got)} rollouts"
        )
        values = np.array([np.nan if v is None else v for v in got], dtype=np.float64)
        same = np.isclose(values, want, rtol=1e-7, atol=1e-12, equal_nan=True)
        wrong = [
            f"{t.id}: per-transcript {g}, vectorised {w}"
            for t, g, w, ok in zip(batch.transcripts, got, want, same, strict=True)
            if not ok
        ]
        expect(
            not wrong, f"{len(wrong)} of {len(got)} rollouts differ between the two forms: " + "; ".join(wrong[:SHOWN])
        )


def reward_design_checks(
    name: str, families: Sequence[FamilySpec] | None = None, *, vectorised: bool = True
) -> list[Check]:
    """Every contract of the registered design `name`: per judge family (every registered one by default),
    then, where the design has an AuditWorld form and `vectorised` is set, the agreement of its two forms."""
    design_spec(name)
    checks: list[Check] = []
    for family in judge_family_names() if families is None else [known_family(f) for f in families]:
        label = f"{name}[{family_label(family)}]"
        checks += [
            Check(f"{label}: empty group", functools.partial(check_empty_group, name, family)),
            Check(f"{label}: one record per rollout", functools.partial(check_records, name, family)),
            Check(f"{label}: abstention", functools.partial(check_abstention, name, family)),
            Check(f"{label}: mixed group", functools.partial(check_mixed_group, name, family)),
        ]
    if vectorised and name in vectorised_names():
        checks.append(Check(f"{name}: vectorised form", functools.partial(check_vectorised_form, name)))
    return checks


def check_reward_design(name: str, families: Sequence[FamilySpec] | None = None) -> None:
    """Run every contract of the registered design `name`; raises one ContractError naming each that broke."""
    run_checks(reward_design_checks(name, families))
