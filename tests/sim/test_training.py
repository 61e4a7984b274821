from __future__ import annotations

import numpy as np
import pytest

from auditrl.sim.designs import binary_rewards
from auditrl.sim.judges import JudgeParams
from auditrl.sim.policies import RandomPolicy
from auditrl.sim.training import TrainConfig, train
from auditrl.sim.simulate import simulate
from auditrl.sim.world import World, training_batch

FAMILIES = ["steady", "chatty", "pliant", "guarded"]
P = JudgeParams()


def test_a_short_training_run_beats_the_random_policy_on_its_own_reward(world: World) -> None:
    cfg = TrainConfig(design="binary", steps=25, groups=32, group_size=4, hidden=32, families=FAMILIES, seed=0)
    result = train(world, cfg)
    rng = np.random.default_rng(123)
    batch = training_batch(world, rng, 256, 4, 0.0, [0, 1, 2, 3], 15)
    trained = binary_rewards(simulate(world, batch, result.policy, np.random.default_rng(1)).observed, P).mean()
    random = binary_rewards(simulate(world, batch, RandomPolicy(), np.random.default_rng(1)).observed, P).mean()
    assert trained > random + 0.1


@pytest.mark.parametrize("design,benign", [("concerningness", 0.0), ("ingroup_pairwise", 0.0), ("reference_pairwise", 0.5)])
def test_every_design_trains_deterministically(world: World, design: str, benign: float) -> None:
    cfg = TrainConfig(design=design, benign_fraction=benign, steps=4, groups=8, group_size=4, hidden=8,
                      reference_refresh=2, families=FAMILIES, seed=1)  # fmt: skip
    a, b = train(world, cfg), train(world, cfg)
    assert [s.reward for s in a.history] == [s.reward for s in b.history]
    assert all(np.isfinite(s.reward) for s in a.history)
