"""Time of one GRPO step on CPU, split into generation, judging and update, today's settings against the
fast ones, on the same work: SmolLM2-135M + LoRA, 2 groups x 4 rollouts, 2 auditor turns + the report,
48 sampled tokens a turn, AuditWorld targets and judges, reference pairwise with 50% benign groups.

- today: `configs/cpu_offline.yaml` (full auditor prompt, about 1,400 tokens; LoRA on every layer);
- fast: `configs/cpu_learn.yaml` (compact prompt; LoRA on the last 8 layers, so the backward pass
  stops there).
Each phase is reported in wall seconds and in this process's CPU seconds: on a machine shared with
other jobs, CPU seconds show the work itself and wall seconds what one waited. The CPU, its capability and
the dtype each setting resolved to are printed with the figures: `policy.dtype: auto` is bfloat16 only on
CPUs with native bf16 (AVX512-BF16 or AMX), so the same config runs in float32 on an AVX2-only CPU. A warm-up step (not
timed) runs first, so that one-time costs (first calls, allocator growth) are not counted. Each
setting's split is printed as soon as it is measured, so a run stopped halfway still reports the first.

    OMP_NUM_THREADS=1 python benchmarks/grpo_step.py [--steps 2] [--only fast]
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
SETTINGS = {"today": CONFIGS / "cpu_offline.yaml", "fast": CONFIGS / "cpu_learn.yaml"}
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


def same_work(cfg: GRPOLMConfig, steps: int) -> GRPOLMConfig:
    """The issue's unit of work on top of a config's speed settings."""
    return cfg.model_copy(
        update={
            "episodes": cfg.episodes.model_copy(update={"max_turns": 2, "max_new_tokens": 48}),
            "data": cfg.data.model_copy(update={"group_size": 4, "groups_per_step": 2, "benign_fraction": 0.5}),
            "trainer": cfg.trainer.model_copy(update={"max_steps": steps + 1, "save_steps": 10_000, "report_to": []}),
        }
    )


def measure(name: str, steps: int) -> Clock:
    cfg = same_work(load_config(SETTINGS[name]), steps)
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
        f"{name} ({resolve_dtype(cfg.policy.dtype)}): {steps} timed step(s), {len(clock.tokens)} sequences of {min(clock.tokens)}-{max(clock.tokens)} "
        f"tokens (mean {sum(clock.tokens) / len(clock.tokens):.0f}); per step, wall/CPU s: {split}",
        highlight=False,
    )
    return clock


def main(
    steps: Annotated[int, typer.Option(min=1, help="Timed steps per setting (after one warm-up step).")] = 1,
    only: Annotated[Literal["both", "today", "fast"], typer.Option(help="Which settings to run.")] = "both",
) -> None:
    torch.set_num_threads(1)
    console.print(describe_cpu(), highlight=False)
    names = ["fast", "today"] if only == "both" else [only]
    clocks = {name: measure(name, steps) for name in names}
    table = Table(
        title="one GRPO step: SmolLM2-135M + LoRA, 2 groups x 4 rollouts, 2 turns + report, 48 tokens/turn",
        caption=describe_cpu(),
    )
    table.add_column("phase")
    for name in names:
        table.add_column(f"{name} wall s", justify="right")
        table.add_column(f"{name} CPU s", justify="right")
        table.add_column(f"{name} share", justify="right")
    if len(names) == 2:
        table.add_column("speed-up (wall)", justify="right")
        table.add_column("speed-up (CPU)", justify="right")
    for phase in PHASES:
        row = [phase]
        for name in names:
            c = clocks[name]
            row += [f"{c.wall[phase]:.1f}", f"{c.cpu[phase]:.1f}", f"{c.cpu[phase] / c.cpu['step']:.0%}"]
        if len(names) == 2:
            today, fast = clocks["today"], clocks["fast"]
            row += [
                f"{today.wall[phase] / max(fast.wall[phase], 1e-9):.1f}x",
                f"{today.cpu[phase] / max(fast.cpu[phase], 1e-9):.1f}x",
            ]
        table.add_row(*row)
    console.print(table)


if __name__ == "__main__":
    typer.run(main)
