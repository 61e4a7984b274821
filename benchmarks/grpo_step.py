"""Time of one GRPO step on CPU, split into generation, judging and update, today's settings against the
fast ones, on the same work (by default): SmolLM2-135M + LoRA, 2 groups x 4 rollouts, 2 auditor turns + the report,
48 sampled tokens a turn, AuditWorld targets and judges, reference pairwise with 50% benign groups.

- today: `configs/cpu_offline.yaml` (full auditor prompt, about 1,400 tokens; LoRA on every layer);
- fast: `configs/experiments/small_lm/cpu_learn.yaml` (compact prompt; LoRA on the last 8 layers, so the backward pass
  stops there).
Each phase is reported in wall seconds and in this process's CPU seconds: on a machine shared with
other jobs, CPU seconds show the work itself and wall seconds what one waited. The CPU, its capability and
the dtype each setting resolved to are printed with the figures: `policy.dtype: auto` is bfloat16 only on
CPUs with native bf16 (AVX512-BF16 or AMX), so the same config runs in float32 on an AVX2-only CPU. A warm-up step (not
timed) runs first, so that one-time costs (first calls, allocator growth) are not counted. Each
setting's split is printed as soon as it is measured, so a run stopped halfway still reports the first.

    OMP_NUM_THREADS=1 python benchmarks/grpo_step.py [--steps 2] [--only fast] \
        [--groups 2 --group-size 4 --turns 2 --tokens 48]
        [--dtype float32] [--model PATH]
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import torch
import typer
from rich.console import Console
from rich.table import Table
from transformers import TrainerCallback

from auditrl.models.precision import describe_cpu, resolve_dtype
from auditrl.train.config import GRPOLMConfig, load_config
from auditrl.train.grpo import build_trainer
from auditrl.train.policy import load_policy

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
SETTINGS = {"today": CONFIGS / "cpu_offline.yaml", "fast": CONFIGS / "experiments" / "small_lm" / "cpu_learn.yaml"}
PHASES = ("generation", "judging", "update", "step")
console = Console(width=130)


@dataclass
class Clock:
    """Wall and CPU seconds accumulated per phase over the timed steps."""

    wall: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    cpu: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    tokens: list[int] = field(default_factory=list)

    def add(self, phase: str, wall: float, cpu: float) -> None:
        self.wall[phase] += wall
        self.cpu[phase] += cpu


def timed(clock: Clock, phase: str, fn: Any, active: list[bool]) -> Any:
    """`fn` wrapped so its wall and CPU time count towards `phase` once timing is active."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn(*args, **kwargs)
        if active[0]:
            clock.add(phase, time.perf_counter() - wall, time.process_time() - cpu)
            if phase == "generation":
                clock.tokens += [len(p) + len(c) for p, c in zip(out["prompt_ids"], out["completion_ids"], strict=True)]
        return out

    wrapper.__name__ = getattr(fn, "__name__", phase)
    return wrapper


class StepClock(TrainerCallback):
    """Times whole optimizer steps after the warm-up step."""

    def __init__(self, clock: Clock, active: list[bool]) -> None:
        self.clock, self.active = clock, active
        self.started = (0.0, 0.0)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.active[0] = state.global_step >= 1
        self.started = (time.perf_counter(), time.process_time())

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.active[0]:
            self.clock.add("step", time.perf_counter() - self.started[0], time.process_time() - self.started[1])


@dataclass(frozen=True)
class Work:
    """The work of one step: the issue's unit by default (a smaller one only checks that the benchmark runs)."""

    groups: int = 2
    group_size: int = 4
    turns: int = 2
    tokens: int = 48

    def __str__(self) -> str:
        return (
            f"{self.groups} groups x {self.group_size} rollouts, {self.turns} turns + report, {self.tokens} tokens/turn"
        )


def same_work(cfg: GRPOLMConfig, steps: int, work: Work) -> GRPOLMConfig:
    """`work` on top of a config's speed settings."""
    return cfg.model_copy(
        update={
            "episodes": cfg.episodes.model_copy(update={"max_turns": work.turns, "max_new_tokens": work.tokens}),
            "data": cfg.data.model_copy(
                update={"group_size": work.group_size, "groups_per_step": work.groups, "benign_fraction": 0.5}
            ),
            "trainer": cfg.trainer.model_copy(update={"max_steps": steps + 1, "save_steps": 10_000, "report_to": []}),
        }
    )


def measure(name: str, steps: int, work: Work, policy: dict[str, str]) -> Clock:
    cfg = same_work(load_config(SETTINGS[name]), steps, work)
    if policy:
        cfg = cfg.model_copy(update={"policy": type(cfg.policy).model_validate({**cfg.policy.model_dump(), **policy})})
    torch.manual_seed(0)
    run_dir = Path(tempfile.mkdtemp(prefix=f"grpo-step-{name}-"))
    clock, active = Clock(), [False]
    try:
        trainer, rollout, reward = build_trainer(cfg, run_dir, policy=load_policy(cfg.policy))
        trainer.rollout_func = timed(clock, "generation", trainer.rollout_func, active)
        trainer.reward_funcs = [timed(clock, "judging", f, active) for f in trainer.reward_funcs]
        trainer.add_callback(StepClock(clock, active))
        trainer.train()
        reward.runner.close()
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    for kind in (clock.wall, clock.cpu):
        kind["update"] = kind["step"] - kind["generation"] - kind["judging"]
        for phase in PHASES:
            kind[phase] /= steps
    split = ", ".join(f"{phase} {clock.wall[phase]:.1f}/{clock.cpu[phase]:.1f}" for phase in PHASES)
    console.print(
        f"{name} ({resolve_dtype(cfg.policy.dtype)}): {steps} timed step(s), "
        f"{len(clock.tokens)} sequences of {min(clock.tokens)}-{max(clock.tokens)} "
        f"tokens (mean {sum(clock.tokens) / len(clock.tokens):.0f}); per step, wall/CPU s: {split}",
        highlight=False,
    )
    return clock


def split_table(clocks: dict[str, Clock], work: Work, model: str) -> Table:
    """Each phase's wall and CPU seconds per setting, and today's over the fast one's where both ran."""
    table = Table(title=f"one GRPO step: {model} + LoRA, {work}", caption=describe_cpu())
    table.add_column("phase")
    for name in clocks:
        table.add_column(f"{name} wall s", justify="right")
        table.add_column(f"{name} CPU s", justify="right")
        table.add_column(f"{name} share", justify="right")
    if len(clocks) == 2:
        table.add_column("speed-up (wall)", justify="right")
        table.add_column("speed-up (CPU)", justify="right")
    for phase in PHASES:
        row = [phase]
        for name in clocks:
            c = clocks[name]
            row += [f"{c.wall[phase]:.1f}", f"{c.cpu[phase]:.1f}", f"{c.cpu[phase] / c.cpu['step']:.0%}"]
        if len(clocks) == 2:
            today, fast = clocks["today"], clocks["fast"]
            row += [
                f"{today.wall[phase] / max(fast.wall[phase], 1e-9):.1f}x",
                f"{today.cpu[phase] / max(fast.cpu[phase], 1e-9):.1f}x",
            ]
        table.add_row(*row)
    return table


def main(
    steps: Annotated[int, typer.Option(min=1, help="Timed steps per setting (after one warm-up step).")] = 1,
    only: Annotated[Literal["both", "today", "fast"], typer.Option(help="Which settings to run.")] = "both",
    groups: Annotated[int, typer.Option(min=1, help="Groups (prompts) per step.")] = Work.groups,
    group_size: Annotated[int, typer.Option(min=2, help="Rollouts per group.")] = Work.group_size,
    turns: Annotated[int, typer.Option(min=1, help="Auditor turns per episode (a report turn follows).")] = Work.turns,
    tokens: Annotated[int, typer.Option(min=1, help="Sampled tokens per turn.")] = Work.tokens,
    dtype: Annotated[
        str | None,
        typer.Option(
            help=(
                "Policy dtype for both settings "
                "(default: each config's own; bfloat16 is slow on CPUs without AVX512-BF16)."
            )
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Policy model for both settings (default: each config's own).")
    ] = None,
) -> None:
    torch.set_num_threads(1)
    console.print(describe_cpu(), highlight=False)
    work = Work(groups, group_size, turns, tokens)
    names = ["fast", "today"] if only == "both" else [only]
    policy = {key: value for key, value in (("dtype", dtype), ("model", model)) if value is not None}
    clocks = {name: measure(name, steps, work, policy) for name in names}
    console.print(split_table(clocks, work, model or "SmolLM2-135M"))


if __name__ == "__main__":
    typer.run(main)
