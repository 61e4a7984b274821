"""Compiling AuditWorld's numba kernels before the first job needs them.

numba compiles a kernel the first time a process calls it (several CPU-seconds for all of them) and caches the machine
code beside `auditrl.auditworld.kernels`; a later process loads it. The install calls `compile_kernels` once, on the
core its byte-compiling leaves idle, so neither the first `make run` (whose CPU time the job reports) nor each test
process pays for the compiling.
"""

from __future__ import annotations

import numpy as np

from auditrl.auditworld import kernels
from auditrl.auditworld.base import RandomInit
from auditrl.auditworld.designs import vectorised_names
from auditrl.auditworld.judges import JudgeParams
from auditrl.auditworld.metrics import EvalConfig, evaluate_policy
from auditrl.auditworld.training import TrainConfig, train_many
from auditrl.auditworld.world import World
from auditrl.behaviors.library import load_behaviors


def compile_kernels() -> list[str]:
    """Train each design with an AuditWorld form (`vectorised_names`) for one step on a few episodes, then evaluate
    one of the auditors on the held-out suite, so that every kernel is compiled for the argument types training and
    evaluation pass it (and cached). Returns the kernels that now have compiled code, by name."""
    world = World.build(load_behaviors())
    family = world.families.names[0]
    init = RandomInit(kind="random")
    cfgs = [
        TrainConfig(
            design=design,
            max_steps=1,
            groups_per_step=2,
            group_size=2,
            hidden=4,
            families=[family],
            init=init,
            benign_fraction=0.5,
        )
        for design in vectorised_names()
    ]
    result = train_many(world, cfgs)[0]
    suite = EvalConfig(family=family, rollouts=1)
    evaluate_policy(world, result.policy, suite, np.random.default_rng(0), JudgeParams())
    return [name for name, value in vars(kernels).items() if getattr(value, "signatures", None)]
