"""What a plugin's own tests import: the contract checks of reward designs and judge families, and test
doubles that speak real protocols (an OpenAI-compatible HTTP server on loopback, `openai_server`).

`check_reward_design(name)` and `check_judge_family(name)` run every contract of a registered design or
family, as scikit-learn's `check_estimator` does for an estimator; `reward_design_checks` and
`judge_family_checks` give the same contracts one `Check` each, for one test per contract. They are
imported on first use, so a test that only wants the loopback server does not load AuditWorld.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from auditrl.testing.checks import Check, ContractError, run_checks
    from auditrl.testing.design_checks import check_reward_design, reward_design_checks
    from auditrl.testing.judge_checks import check_judge_family, judge_family_checks

_HOMES = {
    "Check": "auditrl.testing.checks",
    "ContractError": "auditrl.testing.checks",
    "run_checks": "auditrl.testing.checks",
    "check_reward_design": "auditrl.testing.design_checks",
    "reward_design_checks": "auditrl.testing.design_checks",
    "check_judge_family": "auditrl.testing.judge_checks",
    "judge_family_checks": "auditrl.testing.judge_checks",
}
__all__ = [
    "Check",
    "ContractError",
    "check_judge_family",
    "check_reward_design",
    "judge_family_checks",
    "reward_design_checks",
    "run_checks",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
