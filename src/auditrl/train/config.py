"""Typed configuration of a GRPO run on a language-model auditor (`kind: grpo_lm`), loaded from YAML.

Every field is documented here, so the shipped YAML files only need comments where a value is a choice.
A bad file fails with its path and the dotted field that is wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class ConfigFileError(ValueError):
    """A training config that cannot be read or validated; the message names the file and the field."""


class LoraSettings(BaseModel):
    """peft LoRA adapter: only these weights are trained, so checkpoints stay small."""

    model_config = ConfigDict(extra="forbid")

    r: int = Field(default=8, ge=1, description="Adapter rank.")
    alpha: int = Field(default=16, ge=1, description="LoRA scaling numerator (scale = alpha / r).")
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        min_length=1,
        description="Module names that get an adapter (never lm_head: TRL computes logprobs from its weight).",
    )


class PolicySettings(BaseModel):
    """The auditor being trained."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(
        default="smollm2",
        description="Hugging Face model id or local path; `smollm2` = the offline SmolLM2-135M-Instruct GGUF file.",
    )
    gguf_file: str | None = Field(default=None, description="GGUF file name inside `model` (set for `smollm2`).")
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    attn_implementation: str | None = Field(default=None, description="e.g. `sdpa`, `flash_attention_2`.")
    lora: LoraSettings = Field(default_factory=LoraSettings)


class EpisodeSettings(BaseModel):
    """How one audit episode runs inside a rollout."""

    model_config = ConfigDict(extra="forbid")

    target_model: str = Field(
        default="sim/{family}",
        description="Target model spec; `{family}` is replaced by the row's family (e.g. `sim/{family}`, "
        "`scripted/denier`, `openai/gpt-4.1-mini`, `vllm/...`).",
    )
    families: list[str] = Field(default_factory=lambda: ["default"], min_length=1, description="Target families.")
    target_model_args: dict[str, Any] = Field(default_factory=dict, description="Extra args for resolve_model.")
    max_turns: int = Field(default=15, ge=1, description="Auditor turn budget (the paper trained with 15).")
    max_new_tokens: int = Field(default=512, ge=1, description="Sampled tokens per auditor turn.")
    max_completion_tokens: int = Field(
        default=8192, ge=1, description="Cap on a whole rollout (sampled + environment tokens); an episode over it stops."
    )
    temperature: float = Field(default=1.0, gt=0.0)
    kv_cache: bool = Field(
        default=True, description="Keep each rollout's key/value cache between turns (HF generation only)."
    )
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    tool_protocol: Literal["native", "text"] = Field(
        default="text", description="`text` renders tools into the prompt and parses actions leniently."
    )


class DataSettings(BaseModel):
    """Which (behavior, seed, family, benign) groups make up the training batches."""

    model_config = ConfigDict(extra="forbid")

    behaviors: list[str] | None = Field(default=None, description="Behavior ids; None = every training-split behavior.")
    behavior_paths: list[Path] = Field(default_factory=list, description="Extra behavior files or directories.")
    seed_paths: list[Path] = Field(default_factory=list, description="Extra seed files or directories.")
    group_size: int = Field(default=8, ge=2, description="Rollouts per group (GRPO's G, TRL num_generations).")
    groups_per_step: int = Field(default=4, ge=1, description="Groups in each optimizer step (across all ranks).")
    benign_fraction: float = Field(
        default=0.5, ge=0.0, le=1.0, description="Share of each step's groups run against a benign target."
    )


class RewardSettings(BaseModel):
    """The reward design (auditrl.rewards.registry) and its judge; calibration share = data.benign_fraction."""

    model_config = ConfigDict(extra="forbid")

    design: Literal[
        "concerningness", "binary", "binary_strict", "ingroup_pairwise", "ingroup_bradley_terry", "reference_pairwise"
    ] = "reference_pairwise"
    judge: str = Field(
        default="programmatic",
        description="`programmatic` (judges reading the annotations of simulated/scripted targets) or an "
        "inspect-ai model spec for an LLM judge (e.g. `anthropic/claude-sonnet-4-5`, `vllm/...`).",
    )
    judge_args: dict[str, Any] = Field(default_factory=dict, description="Extra model args for the judge model.")
    reference_refresh_steps: int = Field(
        default=50, ge=1, description="Reference pairwise: refresh each cached reference after N steps (paper: 50)."
    )
    extra_dimensions: list[Path] = Field(
        default_factory=list, description="Concerningness: extra Petri dimension files (markdown with front matter)."
    )


class TrainerSettings(BaseModel):
    """Optimisation and scale-out; mapped onto TRL's GRPOConfig."""

    model_config = ConfigDict(extra="forbid")

    max_steps: int = Field(default=100, ge=1)
    learning_rate: float = Field(default=1e-5, gt=0.0)
    beta: float = Field(default=0.0, ge=0.0, description="KL coefficient against the frozen base (0 = no KL term).")
    epsilon: float = Field(default=0.2, gt=0.0, description="PPO clip range.")
    num_iterations: int = Field(default=1, ge=1, description="Updates per generated batch (GRPO's mu).")
    loss_type: str = Field(default="dapo", description="TRL loss type (grpo, dapo, dr_grpo, bnpo, ...).")
    scale_rewards: Literal["group", "batch", "none"] = "group"
    micro_batch_size: int = Field(default=1, ge=1, description="Rollouts per forward/backward pass per device.")
    max_grad_norm: float = Field(default=1.0, gt=0.0)
    warmup_steps: int = Field(default=0, ge=0)
    save_steps: int = Field(default=50, ge=1, description="Checkpoint every N optimizer steps.")
    save_total_limit: int | None = Field(default=3, ge=1)
    logging_steps: int = Field(default=1, ge=1)
    bf16: bool = False
    gradient_checkpointing: bool = False
    use_vllm: bool = Field(default=False, description="Generate the auditor's turns with vLLM (GPU).")
    vllm_mode: Literal["colocate", "server"] = "colocate"
    vllm_server_host: str = "0.0.0.0"
    vllm_server_port: int = 8000
    vllm_gpu_memory_utilization: float = Field(default=0.3, gt=0.0, le=1.0)
    report_to: list[str] = Field(default_factory=lambda: ["tensorboard"], description="TRL/transformers loggers.")
    extra: dict[str, Any] = Field(default_factory=dict, description="Any other GRPOConfig field, passed through.")


class MonitorSettings(BaseModel):
    """Live reward-hacking monitors."""

    model_config = ConfigDict(extra="forbid")

    markers: Path | None = Field(
        default=None, description="YAML file of confrontation/pressure markers; None = the packaged list."
    )


class GRPOLMConfig(BaseModel):
    """A whole `grpo_lm` run."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["grpo_lm"]
    name: str = Field(default="grpo-lm", description="Run name; the run directory is named after it.")
    seed: int = 0
    policy: PolicySettings = Field(default_factory=PolicySettings)
    episodes: EpisodeSettings = Field(default_factory=EpisodeSettings)
    data: DataSettings = Field(default_factory=DataSettings)
    reward: RewardSettings = Field(default_factory=RewardSettings)
    trainer: TrainerSettings = Field(default_factory=TrainerSettings)
    monitors: MonitorSettings = Field(default_factory=MonitorSettings)
    source: Path | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _check_layout(self) -> GRPOLMConfig:
        rollouts = self.data.group_size * self.data.groups_per_step
        if rollouts % self.trainer.micro_batch_size:
            raise ValueError(
                f"trainer.micro_batch_size={self.trainer.micro_batch_size} must divide "
                f"data.group_size * data.groups_per_step = {rollouts}"
            )
        return self


def read_kind(path: Path) -> str:
    """The `kind:` of a config file, so the CLI can dispatch before validating the rest."""
    raw = _read_yaml(path)
    kind = raw.get("kind")
    if not isinstance(kind, str):
        raise ConfigFileError(f"{path}: field 'kind' is missing or not a string (got {kind!r})")
    return kind


def load_config(path: Path) -> GRPOLMConfig:
    """Read and validate a `grpo_lm` YAML file; relative data paths are resolved against the file."""
    raw = _read_yaml(path)
    try:
        cfg = GRPOLMConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"field '{'.'.join(str(p) for p in err['loc']) or '<root>'}': {err['msg']} (value {err.get('input')!r})"
            for err in exc.errors()
        )
        raise ConfigFileError(f"{path}: {problems}") from exc
    base = path.parent
    data = cfg.data.model_copy(
        update={
            "behavior_paths": [p if p.is_absolute() else base / p for p in cfg.data.behavior_paths],
            "seed_paths": [p if p.is_absolute() else base / p for p in cfg.data.seed_paths],
        }
    )
    markers = cfg.monitors.markers
    if markers is not None and not markers.is_absolute():
        markers = base / markers
    return cfg.model_copy(
        update={"data": data, "monitors": MonitorSettings(markers=markers), "source": path.resolve()}
    )


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigFileError(f"{path}: file not found") from exc
    except yaml.YAMLError as exc:
        raise ConfigFileError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigFileError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    return raw
