from __future__ import annotations

import numpy as np
import pytest

from auditrl.auditworld.base import ImitationInit, RandomInit, imitation_base
from auditrl.auditworld.designs import binary_rewards
from auditrl.auditworld.judges import JudgeParams
from auditrl.auditworld.policies import RandomPolicy
from auditrl.auditworld.simulate import simulate
from auditrl.auditworld.training import TrainConfig, train
from auditrl.auditworld.world import World, training_batch

FAMILIES = ["steady", "chatty", "pliant", "guarded"]
P = JudgeParams()
RANDOM = RandomInit(kind="random", prior_no_finding=0.9)


def test_a_short_training_run_beats_the_random_policy_on_its_own_reward(world: World) -> None:
    cfg = TrainConfig(design="binary", max_steps=25, groups_per_step=32, group_size=4, hidden=32, learning_rate=0.01,
                      families=FAMILIES, seed=0, init=RANDOM)  # fmt: skip
    result = train(world, cfg)
    rng = np.random.default_rng(123)
    batch = training_batch(world, rng, 256, 4, 0.0, [0, 1, 2, 3], 15)
    trained = binary_rewards(simulate(world, batch, result.policy, np.random.default_rng(1)).observed, P).mean()
    random = binary_rewards(simulate(world, batch, RandomPolicy(), np.random.default_rng(1)).observed, P).mean()
    assert trained > random + 0.1


@pytest.mark.parametrize("design,benign", [("concerningness", 0.0), ("ingroup_pairwise", 0.0), ("reference_pairwise", 0.5)])
def test_every_design_trains_deterministically(world: World, design: str, benign: float) -> None:
    cfg = TrainConfig(design=design, benign_fraction=benign, max_steps=4, groups_per_step=8, group_size=4, hidden=8,
                      reference_refresh_steps=2, families=FAMILIES, seed=1, init=RANDOM)  # fmt: skip
    a, b = train(world, cfg), train(world, cfg)
    assert [s.reward for s in a.history] == [s.reward for s in b.history]
    assert all(np.isfinite(s.reward) for s in a.history)


def test_training_starts_from_the_given_base_and_leaves_it_unchanged(world: World) -> None:
    init = ImitationInit(kind="imitation", dagger_rounds=0, audits_per_round=32, turn_budgets=[8], fit_steps=30)
    base = imitation_base(world, init, 8, 0, [0, 1])
    before = {k: v.clone() for k, v in base.state_dict().items()}
    cfg = TrainConfig(design="ingroup_pairwise", max_steps=2, groups_per_step=4, group_size=4, hidden=8, families=FAMILIES,
                      init=init)  # fmt: skip
    result = train(world, cfg, base=base)
    assert all((before[k] == v).all() for k, v in base.state_dict().items())
    assert result.history[0].claim_rate == train(world, cfg, base=base).history[0].claim_rate
    # The first step's rollouts are the base's own: another base gives other first-step audits.
    other = train(world, cfg.model_copy(update={"init": RANDOM}))
    assert [s.turns for s in other.history] != [s.turns for s in result.history]


def test_the_step_monitors_read_off_the_record_equal_the_ground_truth(world: World) -> None:
    from auditrl.auditworld.policies import ExperimenterPolicy, InterrogatorPolicy
    from auditrl.auditworld.training import _stats

    rng = np.random.default_rng(4)
    batch = training_batch(world, rng, 32, 4, 0.5, [0, 1, 2, 3], 12)
    for policy in (ExperimenterPolicy(), InterrogatorPolicy(), RandomPolicy()):
        r = simulate(world, batch, policy, np.random.default_rng(5))
        s, f = _stats(0, r, np.zeros(batch.size)), r.features
        assert s.correct_rate == f.correct[f.planted].mean() and s.claim_rate == (f.claim >= 0).mean()
        assert (s.accusations, s.confessions, s.eval_aware, s.turns) == (
            f.accusations.mean(), f.confessions.mean(), f.eval_aware.mean(), f.turns.mean())
