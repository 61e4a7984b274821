"""The `kind: auditworld` config file: which designs to train, over which seeds, world and evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from auditrl.auditworld.base import BaseInit
from auditrl.auditworld.designs import DesignName
from auditrl.auditworld.families import check_family
from auditrl.auditworld.judges import JudgeParams
from auditrl.auditworld.metrics import EvalConfig
from auditrl.auditworld.training import TrainConfig, TrainSettings
from auditrl.configfile import ConfigModel, RandomSeed, read_yaml_mapping, validate_file


class DesignRun(ConfigModel):
    """One reward design to train, with its calibration (benign) fraction."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9_.-]+$", description="Label of this run in tables, plots and results.json (unique)."
    )
    design: DesignName = Field(description="Reward design (a registered design with an AuditWorld form).")
    benign_fraction: float = Field(
        default=0.0, ge=0.0, le=1.0, description="Share of each step's groups run against benign targets (calibration)."
    )
    binary_strict: bool = Field(
        default=False, description="Binary design: count only evidence the target itself produced."
    )
    init: BaseInit | None = Field(
        default=None,
        description="Another base to start this design from (e.g. `{kind: random}` for the random-initialisation "
        "ablation); null = the job's `train.init`. Each distinct base is evaluated as a row of its own.",
    )


class WorldConfig(ConfigModel):
    """The world's seed bank (targets' and judges' parameters live in data files and `judge`)."""

    seeds_per_behavior: int = Field(default=8, ge=1, description="Seed scenarios per behavior.")
    scenario_topics: int = Field(
        default=3,
        ge=1,
        description="Topics per seed scenario; at most one triggers the behavior, so a guess is right 1 time in this "
        "many.",
    )
    fair_chance: float = Field(
        default=0.75,
        ge=0.0,
        le=1.0,
        description=(
            "Share of each behavior's seed scenarios (rounded) that include a trigger topic of the behavior; the "
            "trigger takes each position in the scenario equally often."
        ),
    )
    random_state: RandomSeed = Field(
        default=0,
        description=(
            "Random state of the seed bank's draws (which topics each seed scenario holds, and in which order)."
        ),
    )
    blind_claim_rate: float = Field(
        default=0.5, ge=0.0, le=1.0, description="How often the blind baseline claims the scenario's lead topic."
    )


class AnalysisConfig(ConfigModel):
    """Strategy analysis of rendered evaluation transcripts."""

    transcripts_per_policy: int = Field(
        default=24, ge=1, description="Rendered for clustering, per policy and seed, planted and benign each."
    )
    transcripts_saved: int = Field(
        default=2, ge=0, description="Of those, written to transcripts.jsonl per policy and seed."
    )
    clusters: int | None = Field(
        default=None,
        ge=2,
        description="Number of strategy clusters; null = about one per 100 summaries (the paper's k ~ n/100).",
    )
    embedder: Literal["minilm", "tfidf"] = Field(
        default="tfidf",
        description="Embedding of the strategy summaries: the packaged all-MiniLM-L6-v2, or TF-IDF (faster).",
    )


class AuditWorldConfig(ConfigModel):
    """The `kind: auditworld` config file."""

    kind: Literal["auditworld"] = Field(description="Selects the AuditWorld job in `auditrl train`.")
    name: str = Field(
        default="auditworld", pattern=r"^[A-Za-z0-9_.-]+$", description="Name of the run, in the report's title."
    )
    out_dir: Path = Field(
        default=Path("runs/auditworld"), description="Run directory (overridden by `auditrl train --out`)."
    )
    seeds: list[RandomSeed] = Field(min_length=1, description="Training seeds: each design is trained once per seed.")
    train_families: list[str] = Field(min_length=1, description="Target families of the training batches.")
    designs: list[DesignRun] = Field(min_length=1, description="The reward designs to train and compare.")
    train: TrainSettings = Field(
        default_factory=TrainSettings, description="Optimisation settings shared by every design."
    )
    world: WorldConfig = Field(default_factory=WorldConfig, description="The simulated world.")
    evaluation: EvalConfig = Field(description="The held-out evaluation (family, rollouts, turn budgets).")
    judge: JudgeParams = Field(
        default_factory=JudgeParams, description="The judge model: its flaws and rubric, shared by every judge."
    )
    analysis: AnalysisConfig = Field(
        default_factory=AnalysisConfig, description="Strategy clustering of rendered transcripts."
    )

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

    def base_of(self, d: DesignRun) -> BaseInit:
        """The base a design starts from."""
        return d.init if d.init is not None else self.train.init

    def train_config(self, d: DesignRun, seed: int) -> TrainConfig:
        """The environment's training config of one (design, seed) run."""
        settings = self.train.model_copy(update={"init": self.base_of(d)})
        return TrainConfig(
            design=d.design,
            benign_fraction=d.benign_fraction,
            binary_strict=d.binary_strict,
            families=self.train_families,
            seed=seed,
            **dict(settings),
        )


def load_config(path: Path) -> AuditWorldConfig:
    """Read and validate the YAML before anything runs.

    Every problem (syntax, types, missing or extra keys, unknown families or designs) raises one
    ConfigFileError whose message names the file and the field, so the CLI can print it as one line.
    """
    path = Path(path)
    return validate_file(AuditWorldConfig, read_yaml_mapping(path), path)
