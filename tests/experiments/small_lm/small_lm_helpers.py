"""Configs and extensions of the small-model experiment for its tests."""

from __future__ import annotations

import copy
from typing import Any

from auditrl.experiments.small_lm.extension import SmallLMExtension
from auditrl.experiments.small_lm.settings import SmallLMSettings, check_run
from auditrl.train.config import GRPOLMConfig

EXPERIMENT_FIELDS = {
    "episodes": ("claim_exploration", "claim_exploration_targets", "report_grammar", "quote_unit", "trained_tokens",
                 "probing", "probing_teacher"),
    "data": ("planted_groups",),
    "reward": ("quote_credit", "expected_verdict", "claim_rate_target", "claim_cost_step"),
}  # fmt: skip
"""Where each experiment setting sat before it had its own section: the tests write them beside the settings they
go with, and `lifted` moves them into `experiment:`."""


def lifted(raw: dict[str, Any]) -> dict[str, Any]:
    """A raw config with the experiment's settings moved from the sections they are written in to `experiment:`."""
    raw = copy.deepcopy(raw)
    section = dict(raw.get("experiment") or {"name": "small_lm"})
    for part, names in EXPERIMENT_FIELDS.items():
        for name in names:
            if name in (raw.get(part) or {}):
                section[name] = raw[part].pop(name)
    raw["experiment"] = section
    return raw


def run_config(raw: dict[str, Any]) -> GRPOLMConfig:
    """A validated experiment config, its settings checked against the run (ValueError when they do not fit)."""
    cfg = GRPOLMConfig.model_validate(lifted(raw))
    assert cfg.experiment is not None
    settings = SmallLMSettings.model_validate(cfg.experiment.model_dump())
    check_run(cfg, settings)
    return cfg.model_copy(update={"experiment": settings})


def with_experiment(cfg: GRPOLMConfig, **settings: Any) -> GRPOLMConfig:
    """`cfg` with these experiment settings, checked against the run."""
    raw = cfg.model_dump(mode="json", exclude={"source"})
    raw["experiment"] = {**(raw.get("experiment") or {"name": "small_lm"}), **settings}
    return run_config(raw)


def extension(cfg: GRPOLMConfig) -> SmallLMExtension:
    """The experiment's hooks for a run."""
    return SmallLMExtension(cfg)
