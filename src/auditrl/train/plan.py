"""The launch plan of a `grpo_lm` run for a world size, without a GPU or weights (`auditrl train --dry-run`).

It checks the batch layout TRL will demand (rollouts per step split evenly over processes x micro batch)
and estimates, per rank, the generation calls, the tokens of a step and the GPU memory of each part.
The memory figures are estimates from the model's shape (mixed-precision AdamW on the LoRA weights,
activations after Korthikanti et al. 2022 with sdpa attention), meant to catch a plan that cannot fit,
not to replace a measurement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from rich.table import Table

from auditrl.configfile import load_yaml
from auditrl.train.config import ConfigFileError, GRPOLMConfig, read_yaml_mapping

GIB = 1024**3
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "auto": 2}
"""Bytes per weight; the plan is for GPUs, where `auto` is bfloat16 (auditrl.models.precision)."""
FP32 = 4
ADAM_STATES = 2
SHARDED_PARAMS = ("FSDP",)
"""accelerate distributed types that shard the policy's weights (DeepSpeed: ZeRO stage 3 only)."""


class ModelShape(BaseModel):
    """A decoder-only transformer's size, as far as memory is concerned."""

    model_config = ConfigDict(extra="forbid")

    params: int = Field(description="Total parameters.")
    layers: int = Field(description="Decoder layers.")
    hidden: int = Field(description="Hidden size.")
    heads: int = Field(description="Attention heads.")
    kv_heads: int = Field(description="Key/value heads (grouped-query attention).")
    head_dim: int = Field(description="Width of one head.")
    intermediate: int = Field(description="MLP width.")
    vocab: int = Field(description="Vocabulary size.")

    def module_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of the linear layers LoRA can target, per decoder layer."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return {
            "q_proj": (self.hidden, q),
            "k_proj": (self.hidden, kv),
            "v_proj": (self.hidden, kv),
            "o_proj": (q, self.hidden),
            "gate_proj": (self.hidden, self.intermediate),
            "up_proj": (self.hidden, self.intermediate),
            "down_proj": (self.intermediate, self.hidden),
        }


def model_shape(model: str) -> ModelShape | None:
    """The shape of a policy: the packaged table, else a local config.json (directory or HF cache); None if neither."""
    table = load_yaml(resources.files("auditrl.train").joinpath("data/model_shapes.yaml").read_text("utf-8"))
    if model in table:
        return ModelShape.model_validate(table[model])
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(model, local_files_only=True)
    except (OSError, ValueError):
        return None
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    shape = ModelShape(
        params=0,
        layers=config.num_hidden_layers,
        hidden=config.hidden_size,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=config.intermediate_size,
        vocab=config.vocab_size,
    )
    per_layer = sum(i * o for i, o in shape.module_shapes().values())
    embeddings = shape.vocab * shape.hidden * (1 if getattr(config, "tie_word_embeddings", False) else 2)
    return shape.model_copy(update={"params": shape.layers * per_layer + embeddings})


@dataclass(frozen=True)
class Launch:
    """How many processes train, and how the accelerate file distributes them."""

    processes: int
    distributed_type: str
    zero_stage: int | None
    source: str

    @property
    def shards_weights(self) -> bool:
        return self.distributed_type in SHARDED_PARAMS or self.zero_stage == 3

    @property
    def shards_optimizer(self) -> bool:
        return self.distributed_type in SHARDED_PARAMS or self.zero_stage is not None


def read_launch(cfg: GRPOLMConfig, processes: int | None = None) -> Launch:
    """The launch the config names (its accelerate file, then `launch.num_processes`), or `processes` if given."""
    path = cfg.launch.accelerate_config
    raw: dict[str, Any] = read_yaml_mapping(path) if path is not None else {}
    count = raw.get("num_processes", 1)
    if not isinstance(count, int) or count < 1:
        raise ConfigFileError(f"{path}: field 'num_processes' must be a positive integer (got {count!r})")
    deepspeed = raw.get("deepspeed_config") or {}
    stage = deepspeed.get("zero_stage") if raw.get("distributed_type") == "DEEPSPEED" else None
    chosen = processes or cfg.launch.num_processes or count
    source = "--processes" if processes else ("launch.num_processes" if cfg.launch.num_processes else (path.name if path else "default"))
    return Launch(chosen, str(raw.get("distributed_type", "NO")), stage, source)


@dataclass(frozen=True)
class BatchLayout:
    """How one optimizer step's rollouts spread over processes and forward/backward passes."""

    processes: int
    rollouts: int
    group_size: int
    micro_batch_size: int

    @property
    def rollouts_per_rank(self) -> int:
        return self.rollouts // self.processes

    @property
    def groups_per_rank(self) -> float:
        return self.rollouts_per_rank / self.group_size

    @property
    def accumulation(self) -> int:
        return self.rollouts // (self.micro_batch_size * self.processes)


def batch_layout(cfg: GRPOLMConfig, processes: int) -> BatchLayout:
    """The layout for `processes` ranks; raises ValueError naming the fields when TRL could not split the batch."""
    rollouts = cfg.data.group_size * cfg.data.groups_per_step
    micro = cfg.trainer.micro_batch_size
    if rollouts % (micro * processes):
        fits = [p for p in range(1, rollouts + 1) if rollouts % (micro * p) == 0]
        raise ValueError(
            f"{cfg.source}: data.group_size * data.groups_per_step = {rollouts} rollouts per step must split evenly "
            f"over {processes} process(es) x trainer.micro_batch_size={micro}; with this micro batch, process counts "
            f"that fit are {', '.join(map(str, fits))}"
        )
    return BatchLayout(processes, rollouts, cfg.data.group_size, micro)


def lora_params(cfg: GRPOLMConfig, shape: ModelShape) -> int:
    modules = shape.module_shapes()
    r = cfg.policy.lora.r
    return shape.layers * sum(r * (modules[m][0] + modules[m][1]) for m in cfg.policy.lora.target_modules if m in modules)


def memory_gib(cfg: GRPOLMConfig, shape: ModelShape, layout: BatchLayout, launch: Launch) -> dict[str, float]:
    """Estimated GPU memory per training rank, by part (GiB). KV cache is the HF generation's (0 with vLLM)."""
    dtype = DTYPE_BYTES[cfg.policy.dtype]
    seq = cfg.episodes.max_completion_tokens
    kv_per_token = 2 * shape.layers * shape.kv_heads * shape.head_dim * dtype
    lora = lora_params(cfg, shape)
    optimizer_share = layout.processes if launch.shards_optimizer else 1
    tokens = layout.micro_batch_size * seq
    per_layer_activations = (2 if cfg.trainer.gradient_checkpointing else 34) * tokens * shape.hidden
    return {
        "policy weights": shape.params * dtype / (layout.processes if launch.shards_weights else 1) / GIB,
        "LoRA weights + grads": lora * 2 * FP32 / GIB,
        "optimizer (AdamW)": lora * ADAM_STATES * FP32 / optimizer_share / GIB,
        "activations": shape.layers * per_layer_activations / GIB,
        "logits": tokens * shape.vocab * dtype / GIB,
        "KV cache (HF generation)": 0.0 if cfg.trainer.use_vllm else layout.rollouts_per_rank * seq * kv_per_token / GIB,
    }


def plan_table(cfg: GRPOLMConfig, launch: Launch) -> Table:
    """The per-rank plan; raises ValueError when the batch layout cannot start."""
    layout = batch_layout(cfg, launch.processes)
    ep, t = cfg.episodes, cfg.trainer
    per_rank = layout.rollouts_per_rank
    sampled = min(ep.max_turns * ep.max_new_tokens, ep.max_completion_tokens)
    table = Table(title=f"{cfg.name}: {launch.processes} process(es) ({launch.source}, {launch.distributed_type})")
    table.add_column("per rank", style="bold")
    table.add_column("plan")
    table.add_row("rollouts per step", f"{layout.rollouts} ({cfg.data.groups_per_step} groups of {cfg.data.group_size})")
    table.add_row("rollouts per rank", f"{per_rank} = {layout.groups_per_rank:g} groups (a split group is gathered whole)")
    table.add_row("passes per step", f"{layout.accumulation} x micro batch {layout.micro_batch_size}")
    if not t.use_vllm:
        generation = f"1 batched HF generate per turn over <= {per_rank} live rollouts"
    elif t.vllm_mode == "server":
        generation = (
            f"1 server call per turn for all ranks: {launch.processes} x max live per rank prompts "
            f"(<= {layout.rollouts}; ranks pad to the largest count, padding dropped)"
        )
    else:
        generation = f"1 colocated vLLM call per turn over <= {per_rank} live rollouts (padded to the ranks' largest)"
    table.add_row("generation calls", f"{generation}; <= {ep.max_turns} turns")
    table.add_row("sampled tokens per step", f"<= {per_rank * sampled:,} ({per_rank} x min(turns x new tokens, cap))")
    if uses_snapshot(cfg):
        references = math.ceil(per_rank / cfg.data.group_size)
        table.add_row(
            "reference rollouts",
            f"<= {references} per step (one per group starting on this rank, played by the frozen snapshot after "
            f"the trained rollouts, not trained on): <= {references * sampled:,} more sampled tokens",
        )
    table.add_row("sequence tokens per step", f"<= {per_rank * ep.max_completion_tokens:,} (+ prompts)")
    if t.use_vllm:
        table.add_row("IS correction", t.vllm_importance_sampling_mode)
    shape = model_shape(cfg.policy.model)
    if shape is None:
        table.add_row("GPU memory", f"unknown shape for {cfg.policy.model!r} (not in the packaged table, not cached)")
        return table
    parts = memory_gib(cfg, shape, layout, launch)
    for name, gib in parts.items():
        table.add_row(name, f"{gib:,.2f} GiB")
    table.add_row("total (training)", f"{sum(parts.values()):,.2f} GiB")
    if t.use_vllm and t.vllm_mode == "colocate":
        table.add_row("vLLM share", f"{t.vllm_gpu_memory_utilization:.0%} of each GPU (weights + KV cache)")
    elif t.use_vllm:
        kv = 2 * shape.layers * shape.kv_heads * shape.head_dim * DTYPE_BYTES[cfg.policy.dtype]
        need = layout.rollouts * ep.max_completion_tokens * kv / GIB
        table.add_row("vLLM share", f"0 on training GPUs; the server's KV cache for all rollouts <= {need:,.1f} GiB")
    return table


def uses_snapshot(cfg: GRPOLMConfig) -> bool:
    """Whether the design compares with references, which a frozen policy snapshot plays each step."""
    from auditrl.rewards.registry import design_spec

    return design_spec(cfg.reward.design).references


def check_snapshot_launch(cfg: GRPOLMConfig, shards_weights: bool) -> None:
    """Reference snapshots are swapped in place (auditrl.train.snapshot): every rank must hold the whole adapter."""
    if shards_weights and uses_snapshot(cfg):
        raise ValueError(
            f"{cfg.source}: reward.design {cfg.reward.design!r} plays reference rollouts with a frozen LoRA snapshot "
            "swapped into the policy, which needs every process to hold the whole adapter; launch with DDP or "
            "DeepSpeed ZeRO-1/2 (configs/accelerate/deepspeed_zero2.yaml), not ZeRO-3 or FSDP"
        )


def dry_run(cfg: GRPOLMConfig, processes: int | None = None) -> Table:
    """Everything `auditrl train --dry-run` checks and prints; ValueError/ConfigFileError name what cannot start."""
    launch = read_launch(cfg, processes)
    check_snapshot_launch(cfg, launch.shards_weights)
    return plan_table(cfg, launch)
