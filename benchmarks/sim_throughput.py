"""AuditWorld throughput on one core: simulated audit episodes per second during training, per design.

Counts every episode simulated (reference episodes included) over the time of `train`, which covers
rollout, judging, advantages and the policy update. Run with OMP_NUM_THREADS=1. Both wall time and
this process's CPU time are shown: on a shared machine the CPU time is the per-core figure (audits per
CPU-second), the wall time includes waiting for a core.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from auditrl.behaviors.library import load_behaviors
from auditrl.sim.designs import vectorised_names
from auditrl.sim.policies import MLPPolicy
from auditrl.sim.training import TrainConfig, train
from auditrl.sim.simulate import simulate
from auditrl.sim.world import World, training_batch

FAMILIES = ["steady", "chatty", "pliant", "guarded"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--groups", type=int, default=128)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-turns", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)
    world = World.build(load_behaviors())
    train(world, TrainConfig(design="binary", max_steps=2, groups_per_step=8, families=FAMILIES, init={"kind": "random"}))  # warm-up (imports, allocator)

    table = Table(title=f"AuditWorld throughput, 1 thread ({args.groups}x{args.group_size} episodes/step, {args.max_turns} turns)")
    for col in ("what", "episodes", "wall s", "episodes/s (wall)", "CPU s", "episodes/CPU-s", "mean turns"):
        table.add_column(col, justify="right" if col != "what" else "left")
    rng = np.random.default_rng(0)
    batch = training_batch(world, rng, args.groups, args.group_size, 0.5, [0, 1, 2, 3], args.max_turns)
    policy = MLPPolicy(hidden=32)
    start, cpu = time.perf_counter(), time.process_time()
    reps = 10
    for _ in range(reps):
        rollout = simulate(world, batch, policy, rng)
    dt, dc = time.perf_counter() - start, time.process_time() - cpu
    n = reps * batch.size
    table.add_row("rollout only (untrained MLP)", f"{n:,}", f"{dt:.2f}", f"{n / dt:,.0f}", f"{dc:.2f}", f"{n / dc:,.0f}",
                  f"{rollout.features.turns.mean():.1f}")  # fmt: skip
    for design in vectorised_names():
        cfg = TrainConfig(
            design=design,
            benign_fraction=0.5 if design == "reference_pairwise" else 0.0,
            steps=args.steps,
            groups=args.groups,
            group_size=args.group_size,
            max_turns=args.max_turns,
            hidden=32,
            families=FAMILIES,
        )
        cpu = time.process_time()
        r = train(world, cfg)
        dc = time.process_time() - cpu
        turns = float(np.mean([s.turns for s in r.history]))
        table.add_row(f"train: {design}", f"{r.episodes:,}", f"{r.seconds:.2f}", f"{r.episodes / r.seconds:,.0f}",
                      f"{dc:.2f}", f"{r.episodes / dc:,.0f}", f"{turns:.1f}")  # fmt: skip
    Console().print(table)


if __name__ == "__main__":
    main()
