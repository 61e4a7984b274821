"""Every field of the AuditWorld and suite configs (judge parameters included) says what it is."""

from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel

from auditrl.auditworld.job.adversarial import AdversarialConfig
from auditrl.auditworld.job.config import AuditWorldConfig
from auditrl.auditworld.job.sweep import SweepConfig
from auditrl.auditworld.training import TrainConfig
from auditrl.evaluate.runner import SuiteConfig


def _models(root: type[BaseModel]) -> list[type[BaseModel]]:
    """`root` and every config model nested in its fields (through lists and optionals)."""
    found: list[type[BaseModel]] = []
    pending = [root]
    while pending:
        model = pending.pop()
        if model in found:
            continue
        found.append(model)
        for field in model.model_fields.values():
            stack = [field.annotation]
            while stack:
                t = stack.pop()
                if isinstance(t, type) and issubclass(t, BaseModel):
                    pending.append(t)
                stack += [a for a in typing.get_args(t) if a is not None]
    return found


@pytest.mark.parametrize(
    "root", [AuditWorldConfig, SweepConfig, AdversarialConfig, TrainConfig, SuiteConfig], ids=lambda m: m.__name__
)
def test_every_config_field_is_described(root: type[BaseModel]) -> None:
    models = _models(root)
    undocumented = [f"{m.__name__}.{n}" for m in models for n, f in m.model_fields.items() if not f.description]
    assert undocumented == []


def test_the_walk_reaches_the_nested_judge_parameters() -> None:
    names = {m.__name__ for m in _models(AuditWorldConfig)}
    assert {
        "DesignRun",
        "TrainSettings",
        "WorldConfig",
        "EvalConfig",
        "JudgeParams",
        "JudgeFlaws",
        "Rubric",
        "AnalysisConfig",
    } <= names
