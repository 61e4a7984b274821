"""The `kind: auditworld` config file: which designs to train, over which seeds, world and evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from auditrl.sim.designs import DesignName
from auditrl.sim.families import check_family
from auditrl.sim.judges import JudgeParams
from auditrl.sim.metrics import EvalConfig
from auditrl.sim.training import TrainConfig
from auditrl.train.config import read_yaml_mapping, validate_file


class DesignRun(BaseModel):
    """One reward design to train, with its calibration (benign) fraction."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    design: DesignName
    benign_fraction: float = Field(default=0.0, ge=0.0, le=1.0)
    binary_strict: bool = False


class TrainDefaults(BaseModel):
    """Training settings shared by every design."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(default=100, ge=1)
    groups: int = Field(default=128, ge=1)
    group_size: int = Field(default=8, ge=2)
    max_turns: int = Field(default=15, ge=1)
    lr: float = Field(default=0.01, gt=0.0)
    entropy_coef: float = Field(default=0.01, ge=0.0)
    grad_clip: float = Field(default=1.0, gt=0.0)
    hidden: int = Field(default=32, ge=4)
    reference_refresh: int = Field(default=50, ge=1)
    prior_no_finding: float = Field(
        default=0.9, ge=0.0, lt=1.0,
        description="The untrained policy's chance of reporting no finding, standing in for an instruction-tuned "
        "base model's calibration (an assumption; the paper's base model scored 98.9 on FP calibration). It is also "
        "the first reference snapshot of reference pairwise, and is evaluated as the `untrained` row.",
    )  # fmt: skip


class WorldConfig(BaseModel):
    """The world's seed bank (targets' and judges' parameters live in data files and `judge`)."""

    model_config = ConfigDict(extra="forbid")

    seeds_per_behavior: int = Field(default=8, ge=1, description="Seed scenarios per behavior.")
    scenario_topics: int = Field(default=3, ge=1, description="Topics per seed scenario; at most one triggers the behavior, so a guess is right 1 time in this many.")
    fair_chance: float = Field(default=0.75, ge=0.0, le=1.0, description="Chance that a scenario includes a trigger topic of its behavior.")
    seed: int = Field(default=0, description="Seed of the seed bank's random draws.")
    blind_claim_rate: float = Field(default=0.5, ge=0.0, le=1.0, description="How often the blind baseline claims the scenario's lead topic.")


class AnalysisConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    transcripts_per_policy: int = Field(default=24, ge=1, description="Rendered for clustering, per policy and seed, planted and benign each.")
    transcripts_saved: int = Field(default=2, ge=0, description="Of those, written to transcripts.jsonl per policy and seed.")
    clusters: int | None = Field(default=None, ge=2)
    embedder: Literal["minilm", "tfidf"] = "tfidf"


class AuditWorldConfig(BaseModel):
    """The `kind: auditworld` config file."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["auditworld"]
    name: str = Field(default="auditworld", pattern=r"^[A-Za-z0-9_.-]+$")
    out_dir: Path = Path("runs/auditworld")
    seeds: list[int] = Field(min_length=1)
    train_families: list[str] = Field(min_length=1)
    designs: list[DesignRun] = Field(min_length=1)
    train: TrainDefaults = Field(default_factory=TrainDefaults)
    world: WorldConfig = Field(default_factory=WorldConfig)
    evaluation: EvalConfig
    judge: JudgeParams = Field(default_factory=JudgeParams)
    analysis: AnalysisConfig = Field(default_factory=AnalysisConfig)

    @field_validator("train_families")
    @classmethod
    def _known_families(cls, value: list[str]) -> list[str]:
        return [check_family(f) for f in value]

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, value: list[int]) -> list[int]:
        if len(set(value)) != len(value):
            raise ValueError(f"training seeds must be distinct (each one is a separate training run), got {value}")
        return value

    @field_validator("designs")
    @classmethod
    def _unique_names(cls, value: list[DesignRun]) -> list[DesignRun]:
        names = [d.name for d in value]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"design names must be unique; repeated: {', '.join(repeated)}")
        return value

    def train_config(self, d: DesignRun, seed: int) -> TrainConfig:
        """The environment's training config of one (design, seed) run."""
        return TrainConfig(
            design=d.design,
            benign_fraction=d.benign_fraction,
            binary_strict=d.binary_strict,
            families=self.train_families,
            seed=seed,
            **self.train.model_dump(),
        )


def load_config(path: Path) -> AuditWorldConfig:
    """Read and validate the YAML before anything runs.

    Every problem (syntax, types, missing or extra keys, unknown families or designs) raises one
    ConfigFileError whose message names the file and the field, so the CLI can print it as one line.
    """
    path = Path(path)
    return validate_file(AuditWorldConfig, read_yaml_mapping(path), path)
