"""AuditWorld throughput on one core: simulated audit episodes per CPU-second during training, per design.

Training starts from the same competent base as `make run` (an imitation of the experimenter, built once
here and not timed), so the audits have the length they have in the main job. Counts every episode
simulated (reference episodes included) over the time of `train`, which covers rollout, judging,
advantages and the policy update. The `lockstep` rows train several seeds of a design together
(`train_many`, as `make run` trains its runs), sharing each step's simulation. Run with OMP_NUM_THREADS=1.
Both wall time and this process's CPU time are shown: on a shared machine the CPU time is the per-core figure
(audits per CPU-second), the wall time includes waiting for a core.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from auditrl.auditworld.base import ImitationInit, RandomInit, build_base
from auditrl.auditworld.designs import vectorised_names
from auditrl.auditworld.simulate import simulate
from auditrl.auditworld.training import TrainConfig, train, train_many
from auditrl.auditworld.world import World, training_batch
from auditrl.behaviors.library import load_behaviors

FAMILIES = ["steady", "chatty", "pliant", "guarded"]


def main(argv: list[str] | None = None) -> Table:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--groups", type=int, default=128)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-turns", type=int, default=15)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument(
        "--base-audits", type=int, default=256, help="audits per cloning round of the base (make run: 256)"
    )
    parser.add_argument("--lockstep", type=int, default=4, help="seeds of a design trained together (make run: 4)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    world = World.build(load_behaviors())
    fams = [world.families.index(f) for f in FAMILIES]
    init = ImitationInit(kind="imitation", audits_per_round=args.base_audits)
    cpu = time.process_time()
    base = build_base(world, init, args.hidden, 0, fams)
    base_cpu = time.process_time() - cpu
    random_base = build_base(world, RandomInit(kind="random"), args.hidden, 0, fams)
    warm = TrainConfig(
        design="binary", max_steps=2, groups_per_step=8, hidden=args.hidden, families=FAMILIES, init=init
    )
    train(world, warm, base=base)  # warm-up (imports, allocator)

    table = Table(
        title=f"AuditWorld throughput, 1 thread, CPU capability {torch.backends.cpu.get_cpu_capability()} "
        f"({args.groups}x{args.group_size} episodes/step, {args.max_turns} turns; base built in {base_cpu:.1f} CPU s)"
    )
    for col in ("what", "episodes", "wall s", "CPU s", "episodes/CPU-s", "mean turns"):
        table.add_column(col, justify="right" if col != "what" else "left")
    rng = np.random.default_rng(0)
    batch = training_batch(world, rng, args.groups, args.group_size, 0.5, fams, args.max_turns)
    for label, policy in (("rollout only, imitation base", base), ("rollout only, random base", random_base)):
        start, cpu = time.perf_counter(), time.process_time()
        reps = 10
        for _ in range(reps):
            rollout = simulate(world, batch, policy, rng)
        dt, dc = time.perf_counter() - start, time.process_time() - cpu
        n = reps * batch.size
        table.add_row(
            label, f"{n:,}", f"{dt:.2f}", f"{dc:.2f}", f"{n / dc:,.0f}", f"{rollout.features.turns.mean():.1f}"
        )
    for design in vectorised_names():
        cfg = TrainConfig(
            design=design,
            benign_fraction=0.5 if design == "reference_pairwise" else 0.0,
            max_steps=args.steps,
            groups_per_step=args.groups,
            group_size=args.group_size,
            max_turns=args.max_turns,
            hidden=args.hidden,
            families=FAMILIES,
            init=init,
        )
        alone = [train(world, cfg, base=base)]
        together = train_many(world, [cfg.model_copy(update={"seed": s}) for s in range(args.lockstep)],
                              bases=[base] * args.lockstep)  # fmt: skip
        for label, results in ((f"train: {design}", alone), (f"lockstep x{args.lockstep}: {design}", together)):
            episodes, cpu_s = sum(r.episodes for r in results), sum(r.cpu_seconds for r in results)
            turns = float(np.mean([s.turns for r in results for s in r.history]))
            table.add_row(label, f"{episodes:,}", f"{sum(r.seconds for r in results):.2f}", f"{cpu_s:.2f}",
                          f"{episodes / cpu_s:,.0f}", f"{turns:.1f}")  # fmt: skip
    Console().print(table)
    return table


if __name__ == "__main__":
    main()
