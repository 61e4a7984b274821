"""The typed results of an AuditWorld job, as written to `<run>/results.json` and read back by the report
and by anyone comparing runs (`AuditWorldResults.read`).

A reader gets named fields instead of keys to remember, and a results file from another version of the job
fails when read with the field that changed, not later with a KeyError.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from auditrl.analysis.assignment import Classifier
from auditrl.analysis.convergence import ConvergenceRow
from auditrl.analysis.strategies import Cluster
from auditrl.atomic import atomic_write_text
from auditrl.auditworld.metrics import SeedSpread
from auditrl.stats import Estimate

RESULTS_FILE = "results.json"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BaseSummary(_Record):
    """A base auditor: how it was built, at what cost, and what each seed's base measured against its expert."""

    label: str = Field(description="How tables name it, with its init and competence.")
    init: dict[str, Any] = Field(description="The `train.init` section it was built from.")
    cpu_seconds: float
    facts: dict[str, dict[str, Any]] = Field(
        description="Per training seed (as a string): agreement with its expert, CPU seconds."
    )


class AuditorResult(_Record):
    """One evaluated auditor (a trained design, a base or a scripted baseline) on the held-out behaviors."""

    kind: str = Field(description="What the row is: a trained design, a base or a baseline.")
    base: str | None = Field(description="The base a trained design started from; None for bases and baselines.")
    estimates: dict[str, Estimate] = Field(
        description="Each metric pooled over the row's audits, with its 95% interval."
    )
    across_training_seeds: dict[str, SeedSpread] = Field(description="Each metric across training seeds.")
    trained_minus_base: dict[str, SeedSpread] | None = Field(
        description="Trained minus its base, per seed; None for untrained rows."
    )
    constant_metrics: dict[str, str] = Field(description="Metrics with no spread to estimate, and why.")
    audit_quality_dimensions: dict[str, float]
    diagnostics: dict[str, float]


class StepRecord(_Record):
    """One training step's monitors (None where a statistic had no data, e.g. no benign groups)."""

    step: int
    reward: float | None
    reward_planted: float | None
    false_positive_rate: float | None
    claim_rate: float | None
    correct_rate: float | None
    accusations: float | None
    confessions: float | None
    eval_aware: float | None
    turns: float | None

    @field_validator("*", mode="before")
    @classmethod
    def _nan_is_none(cls, value: Any) -> Any:
        return None if isinstance(value, float) and math.isnan(value) else value


class TrainingRun(_Record):
    seed: int
    seconds: float
    cpu_seconds: float
    episodes: int
    history: list[StepRecord]


class StrategyResults(_Record):
    """The strategy archetypes of the sampled transcripts and how each design's compare with the paper's."""

    classifier: Classifier
    category_shares: dict[str, dict[str, float]] = Field(description="Per auditor group, each category's share.")
    archetypes: dict[str, str] = Field(description="Transcript id -> archetype id.")
    convergence: list[ConvergenceRow]
    clusters: list[Cluster]


class AuditWorldResults(_Record):
    """Everything a job measured; the report and the README's tables are built from it."""

    kind: Literal["auditworld"] = "auditworld"
    config: dict[str, Any] = Field(description="The job's config, as validated.")
    behaviors: dict[Literal["train", "heldout"], list[str]]
    identification_ceiling: float = Field(
        description="Share (%) of held-out seeds whose behavior can be identified at all."
    )
    never_claims: str = Field(description="The row whose composite a never-claiming auditor gets.")
    bases: dict[str, BaseSummary]
    results: dict[str, AuditorResult]
    intervals: dict[str, str] = Field(description="What each kind of interval in `results` is over.")
    training: dict[str, list[TrainingRun]] = Field(description="Per design, each training seed's run.")
    throughput_episodes_per_cpu_second: float | None
    strategies: StrategyResults
    runtime_seconds: float
    cpu_seconds: float

    def write(self, run_dir: Path) -> Path:
        path = run_dir / RESULTS_FILE
        atomic_write_text(path, self.model_dump_json(indent=2))
        return path

    @classmethod
    def read(cls, run_dir: Path) -> AuditWorldResults:
        return cls.model_validate_json((run_dir / RESULTS_FILE).read_text(encoding="utf-8"))
