"""The installed contract checks (auditrl.testing) over every registered reward design and judge family, one
test per contract: empty group, one record per rollout, abstention, mixed groups, the judges' verdicts, and
each design's vectorised form against its per-transcript form on rendered AuditWorld transcripts."""

from __future__ import annotations

import pytest

from auditrl.auditworld.designs import vectorised_names
from auditrl.judges.client import JudgeClient
from auditrl.judges.registry import ModelJudges, judge_family_names
from auditrl.judges.scripted import scripted_judge_model
from auditrl.rewards.registry import design_names
from auditrl.testing import Check, judge_family_checks, reward_design_checks

DESIGN_CHECKS = [c for name in design_names() for c in reward_design_checks(name)]
FAMILY_CHECKS = [c for family in judge_family_names() for c in judge_family_checks(family)]


@pytest.mark.parametrize("check", DESIGN_CHECKS, ids=lambda c: c.id)
def test_every_registered_design_meets_its_contract(check: Check) -> None:
    check()


@pytest.mark.parametrize("check", FAMILY_CHECKS, ids=lambda c: c.id)
def test_every_registered_judge_family_meets_its_contract(check: Check) -> None:
    check()


def test_the_checks_cover_every_design_family_and_vectorised_form() -> None:
    ids = {c.id for c in DESIGN_CHECKS}
    for name in design_names():
        for family in judge_family_names():
            assert {
                f"{name}[{family}]: {what}"
                for what in ("empty group", "one record per rollout", "abstention", "mixed group")
            } <= ids
    assert {c.id for c in DESIGN_CHECKS if c.id.endswith(": vectorised form")} == {
        f"{n}: vectorised form" for n in vectorised_names()
    }
    assert {c.id.split(":")[0] for c in FAMILY_CHECKS} == set(judge_family_names())


def test_model_judges_whose_replies_never_parse_abstain_with_reasons() -> None:
    """The LLM judges of the package meet the family contract when the model answers garbage."""
    garbage = ModelJudges(JudgeClient(scripted_judge_model(lambda call: "no verdict here"), max_retries=0))
    for check in judge_family_checks(garbage):
        check()
