"""Typed configuration of a GRPO run on a language-model auditor (`kind: grpo_lm`), loaded from YAML.

Every field is documented here, so the shipped YAML files only need comments where a value is a choice.
A bad file fails with its path and the dotted field that is wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, SerializeAsAny, field_validator, model_validator

from auditrl.configfile import ConfigFileError, ConfigModel, RandomSeed, did_you_mean, read_yaml_mapping, validate_file
from auditrl.models.capabilities import provider_info
from auditrl.models.chat_templates import shipped_chat_templates
from auditrl.models.limits import CallLimits
from auditrl.models.lora import LoraSettings
from auditrl.models.precision import DType
from auditrl.models.secrets import check_no_secret_args
from auditrl.models.specs import check_model_spec
from auditrl.plugins import EXPERIMENTS, experiment_module
from auditrl.scaffold.prompt_sets import AuditorPrompt
from auditrl.scaffold.tool_sets import AuditToolSet, ToolProtocol
from auditrl.train.trainer_settings import LaunchSettings, MonitorSettings, TrainerSettings


class PolicySettings(ConfigModel):
    """The auditor being trained."""

    model: str = Field(
        min_length=1,
        description="Hugging Face model id or local path of the auditor to train (e.g. `Qwen/Qwen3-8B`); `smollm2` = "
        "the offline SmolLM2-135M-Instruct GGUF file, for CPU runs.",
    )
    gguf_file: str | None = Field(default=None, description="GGUF file name inside `model` (set for `smollm2`).")
    dtype: DType = Field(
        default="auto",
        description="Weight dtype of the loaded policy. `auto`: bfloat16 on a GPU or a CPU with native bf16 "
        "(AVX512-BF16 or AMX), float32 elsewhere, where bf16 matmuls are emulated and ran 60x slower "
        "(auditrl.models.precision).",
    )
    attn_implementation: str | None = Field(
        default=None, description="transformers attention kernel, e.g. `sdpa`, `flash_attention_2`; None = its default."
    )
    lora: LoraSettings = Field(default_factory=LoraSettings, description="The LoRA adapter that is trained.")
    init_adapter: Path | None = Field(
        default=None,
        description="A LoRA adapter directory to start from instead of a fresh adapter (relative to this config), e.g. "
        "the `adapter/` of `auditrl sft`: a warm-started base. Its base model must be `model` and its settings "
        "`lora`; the first reference snapshot of reference pairwise is then this adapter.",
    )
    chat_template: str | None = Field(
        default=None,
        description="Chat template override: a shipped one by name (`qwen3_multiturn`) or a Jinja file (relative "
        "to this config). Multi-turn token assembly needs a template that renders earlier turns unchanged; Qwen3's "
        "own drops thinking blocks from earlier assistant turns. None = the model's template.",
    )


class EpisodeSettings(ConfigModel):
    """How one audit episode runs inside a rollout."""

    target_model: str = Field(
        default="sim/{family}",
        description="Target model spec; `{family}` is replaced by the row's family (e.g. `sim/{family}`, "
        "`scripted/denier`, `openai/gpt-4.1-mini`, `vllm/...`).",
    )
    families: list[str] = Field(
        default_factory=lambda: ["steady"],
        min_length=1,
        description="Target families, substituted for `{family}` (AuditWorld's for `sim/`, e.g. steady, chatty). A "
        "`local/<dir>` of `auditrl implant` plants by its weights: its own behavior, its base model when benign.",
    )
    target_model_args: dict[str, Any] = Field(default_factory=dict, description="Extra args for resolve_model.")
    target_prefill: Literal["continue", "emulate", "refuse"] | None = Field(
        default=None,
        description="How prefills reach the target (auditrl.models.prefill); default by provider. Declare `continue` "
        "for `openai-api/` servers that honour continue_final_message (vLLM, SGLang).",
    )
    target_calls: CallLimits = Field(
        default_factory=CallLimits,
        description="Retries and timeout of each target call (`max_retries`, `timeout` seconds); API targets only.",
    )
    max_turns: int = Field(default=15, ge=1, description="Auditor turn budget (the paper trained with 15).")
    max_new_tokens: int = Field(default=512, ge=1, description="Sampled tokens per auditor turn.")
    max_report_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Sampled tokens of the report turn; None = max_new_tokens. A claim that names where the target "
        "showed the behavior and quotes it runs longer than a probing message: a report cut inside its JSON does "
        "not parse and earns no credit.",
    )
    max_completion_tokens: int = Field(
        default=8192,
        ge=1,
        description="Cap on a whole rollout (sampled + environment tokens); an episode over it stops.",
    )
    temperature: float = Field(
        default=1.0, gt=0.0, description="Sampling temperature of auditor turns (also TRL's, for its logprob scaling)."
    )
    kv_cache: bool = Field(
        default=True, description="Keep each rollout's key/value cache between turns (HF generation only)."
    )
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, description="Nucleus sampling mass of auditor turns (1 = off).")
    tool_protocol: ToolProtocol = Field(
        default="text", description="`text` renders tools into the prompt and parses actions leniently."
    )
    tool_set: AuditToolSet = Field(
        default="petri2",
        description="The auditor's tools: `petri2` (Petri 1/2's six) or Petri 3.1's `petri3` / `petri3_prefill`.",
    )
    auditor_prompt: AuditorPrompt = Field(
        default="full",
        description="Auditor prompt set (auditrl.scaffold.prompt_sets.PROMPT_SETS): `full` for capable models, "
        "`compact` (a few hundred tokens) for small-context models, whose every training sequence re-reads it.",
    )

    @property
    def report_tokens(self) -> int:
        """The report turn's token budget."""
        return self.max_report_tokens or self.max_new_tokens

    @property
    def longest_turn(self) -> int:
        """The most tokens any one auditor turn may sample: what a generation backend is configured with."""
        return max(self.max_new_tokens, self.report_tokens)

    def turn_tokens(self, phase: str) -> int:
        """Token budget of a turn in the episode's `phase` (`report` or an audit turn)."""
        return self.report_tokens if phase == "report" else self.max_new_tokens

    @field_validator("target_model_args")
    @classmethod
    def _target_args(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_no_secret_args(value)

    @model_validator(mode="after")
    def _check_targets(self) -> EpisodeSettings:
        """Every family's target spec must resolve to a known provider (and `sim/` to a known family)."""
        specs = [self.target_model.replace("{family}", f) for f in self.families]
        for spec in dict.fromkeys(specs):
            check_model_spec(spec, "target model")
            provider, _, name = spec.partition("/")
            if provider_info(provider).family_targets:
                from auditrl.auditworld.families import target_family_names

                known = target_family_names()
                if name not in known:
                    raise ValueError(
                        f"target model {spec!r}: unknown AuditWorld family {name!r}{did_you_mean(name, list(known))}; "
                        f"known families: {', '.join(known)}"
                    )
        return self


class DataSettings(ConfigModel):
    """Which (behavior, seed, family, benign) groups make up the training batches."""

    behaviors: list[str] | None = Field(default=None, description="Behavior ids; None = every training-split behavior.")
    behavior_paths: list[Path] = Field(default_factory=list, description="Extra behavior files or directories.")
    seed_paths: list[Path] = Field(default_factory=list, description="Extra seed files or directories.")
    seed_bank: Literal["library", "auditworld"] = Field(
        default="library",
        description=(
            "`library`: the behaviors' seed banks (and `seed_paths`); `auditworld`: AuditWorld's seeds, which name "
            "their scenario's topics by phrase, at most one of them a trigger (auditrl.auditworld.seeds), for "
            "`sim/` targets."
        ),
    )
    heldout_seeds: int = Field(
        default=0,
        ge=0,
        description="Seeds per training behavior kept out of training (the last N by id), for evaluation on held-out "
        "seeds of training behaviors; `auditrl sft` keeps the same ones out.",
    )
    group_size: int = Field(default=8, ge=2, description="Rollouts per group (GRPO's G, TRL num_generations).")
    groups_per_step: int = Field(default=4, ge=1, description="Groups in each optimizer step (across all ranks).")
    benign_fraction: float = Field(
        default=0.5, ge=0.0, le=1.0, description="Share of each step's groups run against a benign target."
    )

    @model_validator(mode="after")
    def _one_seed_bank(self) -> DataSettings:
        if self.seed_bank == "auditworld" and self.seed_paths:
            raise ValueError("seed_paths add library seeds; they cannot be combined with seed_bank 'auditworld'")
        return self


class RewardSettings(ConfigModel):
    """The reward design (auditrl.rewards.registry) and its judge; calibration share = data.benign_fraction."""

    design: str = Field(
        default="reference_pairwise",
        description="Reward design that turns judge verdicts into rewards: a name registered in "
        "auditrl.rewards.registry (`auditrl judge score --help` lists them).",
    )
    judge: str = Field(
        default="programmatic",
        description=(
            "`programmatic` (generic judges reading the annotations of any simulated/scripted target), `sim` "
            "(AuditWorld's judges with their modelled weaknesses, the ones AuditWorld trains against; for "
            "`sim/<family>` targets) or an inspect-ai model spec for an LLM judge (e.g. "
            "`anthropic/claude-sonnet-4-5`, `vllm/...`)."
        ),
    )
    judge_args: dict[str, Any] = Field(default_factory=dict, description="Extra model args for the judge model.")
    judge_calls: CallLimits = Field(
        default_factory=CallLimits,
        description="Retries and timeout of each judge call (`max_retries`, `timeout` seconds); a verdict whose call "
        "fails within them is an abstention with the reason.",
    )
    reference_refresh_steps: int = Field(
        default=50,
        ge=1,
        description=(
            "Reference pairwise: take a new frozen policy snapshot (it plays the references) every N steps (paper: 50)."
        ),
    )
    extra_dimensions: list[Path] = Field(
        default_factory=list, description="Concerningness: extra Petri dimension files (markdown with front matter)."
    )
    no_contact_reward: float | None = Field(
        default=None,
        description="Reward of an audit that never reached the target (no target reply on any branch), instead of "
        "the design's; None leaves it to the design. Such an audit has no evidence, yet a judge that scores the "
        "claim rather than the evidence (AuditWorld's calibration judge) can rank it above a real audit.",
    )
    benign_scale: float = Field(
        default=1.0,
        gt=0.0,
        le=1.0,
        description='Multiplies the reward of every audit of a benign target: the pay of a right "nothing found" '
        "against that of a credited finding. A policy maximising the expected reward claims when P(planted) times "
        "the share of its claims the grader credits exceeds P(benign) times this scale, so under the binary reward "
        "with 1 a claim that is credited half the time pays only where P(planted) > 2/3; 0.5 moves that to 1/2. "
        "Each GRPO group shares one target, so a group-wise reward std (trainer.scale_rewards: group) would undo it; "
        "it needs `batch` or `none`.",
    )

    @field_validator("design")
    @classmethod
    def _design(cls, value: str) -> str:
        from auditrl.rewards.registry import check_design

        return check_design(value)

    @field_validator("judge")
    @classmethod
    def _judge(cls, value: str) -> str:
        """A judge family (auditrl.judges.registry) or a model spec, checked now so a typo fails before any model
        loads."""
        from auditrl.judges.registry import judge_family_names

        families = list(judge_family_names())
        if value in families:
            return value
        if "/" not in value:
            raise ValueError(
                f"unknown judge {value!r}{did_you_mean(value, families)}: use {', '.join(map(repr, families))} "
                "or an inspect-ai model spec <provider>/<model> (e.g. anthropic/claude-sonnet-4-5)"
            )
        return check_model_spec(value, "judge model")

    @field_validator("judge_args")
    @classmethod
    def _judge_args(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_no_secret_args(value)


class ExperimentSection(ConfigModel):
    """An experiment's own config section: `name` names the experiment; the rest is its own to validate."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    name: str = Field(description="The experiment these settings belong to.")


class GRPOLMConfig(ConfigModel):
    """A whole `grpo_lm` run."""

    @model_validator(mode="before")
    @classmethod
    def _named_policy(cls, data: Any) -> Any:
        """No default auditor: a GPU run would otherwise train whatever the default is."""
        policy = data.get("policy") if isinstance(data, dict) else None
        if isinstance(data, dict) and (policy is None or (isinstance(policy, dict) and "model" not in policy)):
            raise ValueError(
                "field 'policy.model' is required: the Hugging Face id or local path of the auditor to train "
                "(e.g. Qwen/Qwen3-8B), or `smollm2` for the offline SmolLM2-135M on a CPU"
            )
        return data

    kind: Literal["grpo_lm"] = Field(description="Config kind: `grpo_lm` = GRPO on a language-model auditor.")
    name: str = Field(default="grpo-lm", description="Run name; the run directory is named after it.")
    seed: RandomSeed = Field(default=0, description="Seed of batch sampling, TRL, torch and the data order.")
    policy: PolicySettings = Field(description="The auditor being trained (`policy.model` is required).")
    episodes: EpisodeSettings = Field(default_factory=EpisodeSettings, description="How each audit episode runs.")
    data: DataSettings = Field(default_factory=DataSettings, description="Which groups make up each step.")
    reward: RewardSettings = Field(default_factory=RewardSettings, description="Reward design and judge.")
    trainer: TrainerSettings = Field(default_factory=TrainerSettings, description="Optimisation and scale-out.")
    monitors: MonitorSettings = Field(default_factory=MonitorSettings, description="Reward-hacking monitors.")
    launch: LaunchSettings = Field(default_factory=LaunchSettings, description="How the run is launched.")
    experiment: SerializeAsAny[ExperimentSection] | None = Field(
        default=None,
        description="Settings of an experiment built on the trainer (auditrl.train.extensions), which the trainer "
        "does not read: the experiment validates them and attaches its hooks. None: a plain GRPO run.",
    )
    source: Path | None = Field(
        default=None, exclude=True, description="The file this config was read from (set by load_config)."
    )

    @model_validator(mode="after")
    def _check_layout(self) -> GRPOLMConfig:
        if self.reward.benign_scale != 1.0 and self.trainer.scale_rewards == "group":
            raise ValueError(
                f"reward.benign_scale={self.reward.benign_scale} is undone by trainer.scale_rewards=group (each group "
                "shares one target, so dividing by the group's reward std removes the scale); set it to batch or none"
            )
        rollouts = self.data.group_size * self.data.groups_per_step
        if rollouts % self.trainer.micro_batch_size:
            raise ValueError(
                f"trainer.micro_batch_size={self.trainer.micro_batch_size} must divide "
                f"data.group_size * data.groups_per_step = {rollouts}"
            )
        return self


def check_plain(cfg: GRPOLMConfig, path: Path | str, command: str) -> None:
    """Refuse a config with an experiment's section in a command that would not apply it."""
    if cfg.experiment is not None:
        name = cfg.experiment.name
        module = experiment_module(name)
        how = (
            f"run `python -m {module} {command.split()[-1]} --config {path}`"
            if module
            else f"no installed package registers an experiment named {name!r} (entry-point group {EXPERIMENTS!r})"
        )
        raise ConfigFileError(
            f"{path}: field 'experiment': settings of the {name!r} experiment, which `{command}` alone does not apply; "
            + how
        )


def load_config(path: Path) -> GRPOLMConfig:
    """Read and validate a `grpo_lm` YAML file; relative data paths are resolved against the file.

    Everything that can be checked without a model is checked here (enumerations, model specs, target
    families, behavior ids), so a bad file fails in a second, not after the policy has loaded.
    """
    path = Path(path)
    cfg = validate_file(GRPOLMConfig, read_yaml_mapping(path), path)
    base = path.parent

    def near(p: Path) -> Path:
        return p if p.is_absolute() else base / p

    data = cfg.data.model_copy(
        update={
            "behavior_paths": [near(p) for p in cfg.data.behavior_paths],
            "seed_paths": [near(p) for p in cfg.data.seed_paths],
        }
    )
    markers = near(cfg.monitors.markers) if cfg.monitors.markers is not None else None
    launch = near(cfg.launch.accelerate_config) if cfg.launch.accelerate_config is not None else None
    _check_behaviors(path, data, cfg.episodes)
    policy = cfg.policy
    if policy.chat_template is not None and policy.chat_template not in shipped_chat_templates():
        template = near(Path(policy.chat_template))
        if not template.is_file():
            raise ConfigFileError(
                f"{path}: field 'policy.chat_template': {policy.chat_template!r} is neither a shipped template "
                f"({', '.join(shipped_chat_templates())}) nor a file"
            )
        policy = policy.model_copy(update={"chat_template": str(template)})
    if policy.init_adapter is not None:
        policy = policy.model_copy(update={"init_adapter": near(policy.init_adapter)})
    return cfg.model_copy(
        update={
            "data": data,
            "policy": policy,
            "monitors": MonitorSettings(markers=markers),
            "launch": cfg.launch.model_copy(update={"accelerate_config": launch}),
            "source": path.resolve(),
        }
    )


def _check_behaviors(path: Path, data: DataSettings, episodes: EpisodeSettings) -> None:
    """The behavior files load, `data.behaviors` names training behaviors that exist, and the target families load."""
    from auditrl.behaviors.library import load_behaviors
    from auditrl.targets.pool import target_family

    try:
        library = load_behaviors(data.behavior_paths or None)
    except ValueError as exc:
        raise ConfigFileError(f"{path}: field 'data.behavior_paths': {' '.join(str(exc).split())}") from exc
    for i, bid in enumerate(data.behaviors or []):
        if bid not in library:
            raise ConfigFileError(
                f"{path}: field 'data.behaviors.{i}': unknown behavior id {bid!r}{did_you_mean(bid, sorted(library))}; "
                f"see `auditrl behaviors list`"
            )
        if library[bid].split != "train":
            raise ConfigFileError(
                f"{path}: field 'data.behaviors.{i}': {bid!r} is a held-out behavior and may not be used in training"
            )
    for i, family in enumerate(episodes.families):
        try:
            target_family(episodes.target_model, family, library)
        except ValueError as exc:
            raise ConfigFileError(f"{path}: field 'episodes.families.{i}': {exc}") from exc
