"""The launch plan of a `grpo_lm` run for a world size, without a GPU or weights (`auditrl train --dry-run`).

It checks what would stop a launch before any weights load: the batch layout TRL will demand (rollouts
per step split evenly over processes x micro batch), a rollout that would outgrow the model's context,
reference snapshots under sharded weights, and an FSDP state-dict type under which no adapter is saved.
It then estimates, per rank, the generation calls, the tokens of a step and the GPU memory of each part, `local/`
targets' included (auditrl.train.memory), and warns where vLLM's KV room is smaller than a step's live tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from auditrl.train.config import GRPOLMConfig
from auditrl.train.layout import FULL_STATE_DICT, Launch, batch_layout, read_launch
from auditrl.train.memory import KVRoom, local_targets, memory_gib, model_shape, sequence_tokens, vllm_kv_room


@dataclass
class Plan:
    """The per-rank plan of a launch and what in it needs attention (a plan with warnings can still start)."""

    table: Table
    warnings: list[str] = field(default_factory=list)

    def results(self) -> dict[str, Any]:
        """The plan as `--json` writes it: the table's title, its rows (name -> value) and the warnings."""
        names, values = (column.cells for column in self.table.columns)
        return {"title": self.table.title, "plan": dict(zip(names, values, strict=True)), "warnings": self.warnings}


def plan_table(cfg: GRPOLMConfig, launch: Launch) -> Plan:
    """The per-rank plan; raises ValueError when the batch layout cannot start."""
    layout = batch_layout(cfg, launch.processes)
    ep, t = cfg.episodes, cfg.trainer
    per_rank = layout.rollouts_per_rank
    sampled = min(ep.max_turns * ep.max_new_tokens + ep.report_tokens, ep.max_completion_tokens)
    table = Table(title=f"{cfg.name}: {launch.processes} process(es) ({launch.source}, {launch.distributed_type})")
    plan = Plan(table)
    table.add_column("per rank", style="bold")
    table.add_column("plan")
    table.add_row(
        "rollouts per step", f"{layout.rollouts} ({cfg.data.groups_per_step} groups of {cfg.data.group_size})"
    )
    table.add_row(
        "rollouts per rank", f"{per_rank} = {layout.groups_per_rank:g} groups (a split group is gathered whole)"
    )
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
    table.add_row(
        "sampled tokens per step",
        f"<= {per_rank * sampled:,} ({per_rank} x min(turns x new tokens + report tokens, cap))",
    )
    if uses_snapshot(cfg):
        references = math.ceil(per_rank / cfg.data.group_size)
        table.add_row(
            "reference rollouts",
            f"<= {references} per step (one per group starting on this rank, played by the frozen snapshot after "
            f"the trained rollouts, not trained on): <= {references * sampled:,} more sampled tokens",
        )
    seq = sequence_tokens(cfg)
    table.add_row("sequence tokens", f"<= {seq:,} a rollout (opening prompt <= {seq - ep.max_completion_tokens:,}), "
                  f"<= {per_rank * seq:,} per step")  # fmt: skip
    if t.use_vllm:
        table.add_row("IS correction", t.vllm_importance_sampling_mode)
    shape = model_shape(cfg.policy.model)
    if shape is None:
        table.add_row("GPU memory", f"unknown shape for {cfg.policy.model!r} (not in the packaged table, not cached)")
        return plan
    check_context(cfg, shape.context)
    parts = memory_gib(cfg, shape, layout, launch)
    if (targets := local_targets(cfg)) is not None:
        table.add_row("local targets", targets[0])
        parts |= {} if targets[1] is None else {"target weights (local)": targets[1]}
    for name, gib in parts.items():
        table.add_row(name, f"{gib:,.2f} GiB")
    training = sum(parts.values())
    table.add_row("total (training)", f"{training:,.2f} GiB")
    _vllm_rows(cfg, plan, training, vllm_kv_room(cfg, shape, layout))
    if not t.use_vllm and training > cfg.launch.gpu_memory_gib:
        plan.warnings.append(
            f"the training estimate ({training:,.1f} GiB) exceeds launch.gpu_memory_gib "
            f"({cfg.launch.gpu_memory_gib:g} GiB)"
        )
    return plan


def _vllm_rows(cfg: GRPOLMConfig, plan: Plan, training: float, room: KVRoom | None) -> None:
    """vLLM's share and its KV room against the step's live tokens (preemption when they do not fit)."""
    if room is None:
        return
    gpu = cfg.launch.gpu_memory_gib
    plan.table.add_row(
        "vLLM share", f"{room.share_gib:,.1f} GiB of a {gpu:g} GiB GPU in {room.where} (weights + KV cache)"
    )
    plan.table.add_row(
        "vLLM KV room",
        f"{room.room_tokens:,} tokens against up to {room.live_tokens:,} live tokens "
        f"({room.room_tokens / room.live_tokens:.0%})",
    )
    if room.preempts:
        more = (
            "raise trainer.vllm_gpu_memory_utilization"
            if cfg.trainer.vllm_mode == "colocate"
            else "serve with more GPUs (trl vllm-serve --data_parallel_size N)"
        )
        plan.warnings.append(
            f"vLLM's KV cache in {room.where} holds about {room.room_tokens:,} tokens, but a step keeps up to "
            f"{room.live_tokens:,} live: once it is full vLLM preempts sequences and recomputes them, which slows the "
            f"longest turns; {more} or lower data.groups_per_step or episodes.max_completion_tokens"
        )
    if cfg.trainer.vllm_mode == "colocate" and training + room.share_gib > gpu:
        plan.warnings.append(
            f"training ({training:,.1f} GiB) and vLLM's share ({room.share_gib:,.1f} GiB) exceed the GPU "
            f"({gpu:g} GiB, launch.gpu_memory_gib)"
        )


def check_context(cfg: GRPOLMConfig, context: int) -> None:
    """A rollout (opening prompt + episodes.max_completion_tokens) must fit the model's and vLLM's context."""
    seq = sequence_tokens(cfg)
    prompt = seq - cfg.episodes.max_completion_tokens
    if seq > context:
        raise ValueError(
            f"{cfg.source}: episodes.max_completion_tokens = {cfg.episodes.max_completion_tokens:,} plus an "
            f"opening prompt of up to {prompt:,} tokens ({cfg.episodes.auditor_prompt} prompt set) exceeds the "
            f"context of {cfg.policy.model!r} ({context:,} tokens); set episodes.max_completion_tokens to at "
            f"most {context - prompt:,}"
        )
    vllm_length = cfg.trainer.extra.get("vllm_max_model_length")
    if cfg.trainer.use_vllm and isinstance(vllm_length, int) and seq > vllm_length:
        raise ValueError(
            f"{cfg.source}: trainer.extra.vllm_max_model_length = {vllm_length:,} is shorter than a rollout "
            f"(up to {seq:,} tokens: opening prompt + episodes.max_completion_tokens)"
        )


def check_fsdp_saves_adapter(state_dict_type: str | None, source: object) -> None:
    """Under FSDP, Trainer.save_model writes weights only with a full state dict; with a sharded one it writes
    nothing, and the run would end without an adapter."""
    if state_dict_type is not None and FULL_STATE_DICT not in state_dict_type:
        raise ValueError(
            f"{source}: FSDP with state dict type {state_dict_type} saves no adapter (Trainer.save_model writes "
            f"weights only with {FULL_STATE_DICT}); set fsdp_state_dict_type: {FULL_STATE_DICT} in the accelerate file"
        )


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


def dry_run(cfg: GRPOLMConfig, processes: int | None = None) -> Plan:
    """Everything `auditrl train --dry-run` checks and prints; ValueError/ConfigFileError name what cannot start."""
    launch = read_launch(cfg, processes)
    check_snapshot_launch(cfg, launch.shards_weights)
    check_fsdp_saves_adapter(launch.fsdp_state_dict_type, cfg.launch.accelerate_config)
    return plan_table(cfg, launch)
