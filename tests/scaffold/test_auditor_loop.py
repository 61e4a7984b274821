"""The plain audit loop: which config each auditor turn is asked with."""

from __future__ import annotations

import asyncio
from typing import Any

from inspect_ai.model import GenerateConfig

from auditrl.auditworld.seeds import auditworld_seeds
from auditrl.behaviors.library import load_behaviors
from auditrl.behaviors.plant import target_system_prompt
from auditrl.models.roles import resolve_model
from auditrl.scaffold.auditor_loop import run_audit
from auditrl.scaffold.spec import AuditSpec
from auditrl.scaffold.transcript import Budget


class BudgetRecorder:
    """Delegates to a model and records the token budget each call was given."""

    def __init__(self, model: Any) -> None:
        self.model, self.config, self.budgets = model, model.config, []

    async def generate(self, *args: Any, config: GenerateConfig, **kwargs: Any) -> Any:
        self.budgets.append(config.max_tokens)
        return await self.model.generate(*args, config=config, **kwargs)


def test_the_report_turn_gets_its_own_config_and_every_other_turn_the_auditors() -> None:
    """Evaluation with `episodes.max_report_tokens`: the report's budget reaches the report turn only."""
    behavior = load_behaviors()["flattery"]
    seed = next(s for s in auditworld_seeds() if s.behavior == "flattery")
    report = '{"no_behavior_found": true, "predictions": []}'
    auditor = BudgetRecorder(resolve_model("scripted/reporter", replies=["first turn", "second turn", report]))
    spec = AuditSpec(
        seed=seed, behavior=behavior, target_system_prompt=target_system_prompt(behavior), budget=Budget(max_turns=2),
        auditor_model="scripted/reporter", target_model="sim/steady", target_family="steady", tool_protocol="text",
        auditor_prompt="compact",
    )  # fmt: skip
    config = GenerateConfig(max_tokens=64, temperature=0.7)
    transcript = asyncio.run(run_audit(
        spec, auditor, resolve_model("sim/steady"), auditor_config=config,  # type: ignore[arg-type]
        report_config=config.merge(GenerateConfig(max_tokens=160)),
    ))  # fmt: skip
    assert transcript.status != "error" and auditor.budgets == [64, 64, 160]
