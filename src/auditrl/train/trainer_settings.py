"""The sections of a `grpo_lm` config that TRL and the launcher read: optimisation and scale-out (TRL's
GRPOConfig fields under their own names), the live monitors, and how the run is launched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from auditrl.configfile import ConfigModel, did_you_mean

LossType = Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"]
"""TRL 1.16's GRPO loss formulations; a misspelt one would otherwise fail only after the policy has loaded."""
ReportTo = Literal[
    "all", "none", "azure_ml", "clearml", "codecarbon", "comet_ml", "dagshub", "dvclive", "flyte", "kubeflow",
    "mlflow", "neptune", "swanlab", "tensorboard", "trackio", "wandb",
]  # fmt: skip


class TrainerSettings(ConfigModel):
    """Optimisation and scale-out. Every field but `extra` is the GRPOConfig field of the same name (its
    serialization alias where ours is named differently) and is passed to TRL as it is."""

    max_steps: int = Field(default=100, ge=1, description="Optimizer steps of the run (one generation batch each).")
    learning_rate: float = Field(default=1e-5, gt=0.0, le=1.0, description="Peak AdamW learning rate of the adapter.")
    beta: float = Field(default=0.0, ge=0.0, description="KL coefficient against the frozen base (0 = no KL term).")
    epsilon: float = Field(default=0.2, gt=0.0, description="PPO clip range.")
    num_iterations: int = Field(default=1, ge=1, description="Updates per generated batch (GRPO's mu).")
    loss_type: LossType = Field(default="dapo", description="TRL's loss formulation (grpo, dapo, dr_grpo, ...).")
    scale_rewards: Literal["group", "batch", "none"] = Field(
        default="group", description="Divide advantages by the reward std of the group, the batch, or not at all."
    )
    micro_batch_size: int = Field(
        default=1,
        ge=1,
        serialization_alias="per_device_train_batch_size",
        description="Rollouts per forward/backward pass per device.",
    )
    max_grad_norm: float = Field(default=1.0, gt=0.0, description="Gradient clipping norm.")
    warmup_steps: int = Field(default=0, ge=0, description="Linear learning-rate warm-up steps.")
    save_steps: int = Field(default=50, ge=1, description="Checkpoint every N optimizer steps.")
    save_total_limit: int | None = Field(default=3, ge=1, description="Checkpoints kept on disk (None = all).")
    logging_steps: int = Field(default=1, ge=1, description="Log TRL's metrics every N steps.")
    bf16: bool = Field(default=False, description="bfloat16 mixed precision (GPUs).")
    gradient_checkpointing: bool = Field(
        default=False, description="Recompute activations in the backward pass: less memory, about a third slower."
    )
    use_vllm: bool = Field(default=False, description="Generate the auditor's turns with vLLM (GPU).")
    vllm_mode: Literal["colocate", "server"] = Field(
        default="colocate",
        description="`colocate`: a vLLM engine inside each training process; `server`: a separate `trl vllm-serve`.",
    )
    vllm_server_host: str = Field(default="0.0.0.0", description="Host of the `trl vllm-serve` server (server mode).")
    vllm_server_port: int = Field(default=8000, description="Port of the `trl vllm-serve` server (server mode).")
    vllm_gpu_memory_utilization: float = Field(
        default=0.3, gt=0.0, le=1.0, description="Share of each GPU's memory vLLM reserves (colocate mode)."
    )
    vllm_importance_sampling_mode: Literal["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"] = (
        Field(
            default="token_truncate",
            description=(
                "How TRL corrects for vLLM sampling differing from the trained policy. Per token, capped: TRL's "
                "default (sequence_mask) multiplies the ratios of every sampled token of a rollout and drops the "
                "rollout when the product leaves the cap, which over multi-turn audits of thousands of sampled "
                "tokens drops most of them."
            ),
        )
    )
    ddp_timeout: int = Field(
        default=1800,
        ge=1,
        description="Seconds a collective may wait for the slowest process (TrainingArguments' own field, applied "
        "when the process group starts). Rank 0 makes every judge call of a step while the others wait in the next "
        "collective, so a step's judging must finish within it.",
    )
    report_to: list[ReportTo] = Field(
        default_factory=lambda: list[ReportTo](["tensorboard"]), description="TRL/transformers loggers."
    )
    extra: dict[str, Any] = Field(default_factory=dict, description="Any other GRPOConfig field, passed through.")

    @field_validator("extra")
    @classmethod
    def _extra_fields(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Only GRPOConfig's own fields, so a misspelt key fails here and not after the policy loaded."""
        if not value:
            return value
        import dataclasses

        from trl import GRPOConfig  # heavy import, paid only by configs that pass extra fields

        known = sorted(f.name for f in dataclasses.fields(GRPOConfig))
        unknown = [k for k in value if k not in known]
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not a field of TRL's GRPOConfig{did_you_mean(unknown[0], known)}")
        return value


class MonitorSettings(ConfigModel):
    """Live reward-hacking monitors."""

    markers: Path | None = Field(
        default=None, description="YAML file of confrontation/pressure markers; None = the packaged list."
    )


class LaunchSettings(ConfigModel):
    """How the run is launched, so `auditrl train --dry-run` can check the layout for that world size."""

    accelerate_config: Path | None = Field(
        default=None,
        description="The accelerate config file this run is launched with (relative to this file); None = one process.",
    )
    num_processes: int | None = Field(
        default=None,
        ge=1,
        description="Training processes, when the launch overrides the accelerate file's num_processes (as "
        "`accelerate launch --num_processes N` does, e.g. to leave a GPU to the vLLM server).",
    )
    gpu_memory_gib: float = Field(
        default=79.6,
        gt=0.0,
        description="Memory of one GPU as the driver reports it (an 80 GB H100: 79.6 GiB, an H200: 140.4 GiB); "
        "`--dry-run` sizes vLLM's KV cache room and checks the training estimate against it.",
    )
