from __future__ import annotations

import dataclasses

import numpy as np

from auditrl.auditworld.policies import MLPPolicy, RandomPolicy
from auditrl.auditworld.simulate import simulate
from auditrl.auditworld.world import World, training_batch
from auditrl.behaviors.library import load_behaviors


def _run(world: World, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    batch = training_batch(world, rng, 16, 4, 0.5, [0, 1, 2, 3], 15)
    return dataclasses.asdict(simulate(world, batch, MLPPolicy(seed=seed), rng).features)


def test_same_seed_same_episodes_different_seed_different(world: World) -> None:
    a, b, c = _run(world, 3), _run(world, 3), _run(world, 4)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not all(np.array_equal(a[k], c[k]) for k in a)


def test_training_batches_hold_groups_benign_share_and_no_heldout_behavior(world: World) -> None:
    rng = np.random.default_rng(0)
    batch = training_batch(world, rng, 40, 8, 0.5, [0, 1], 15)
    groups = batch.behavior.reshape(40, 8)
    assert (groups == groups[:, :1]).all()
    assert (groups[:, 0] < 0).sum() == 20
    heldout = set(world.behavior_indices("heldout").tolist())
    assert not heldout & set(batch.seed_behavior.tolist())
    assert not heldout & set(batch.behavior[batch.behavior >= 0].tolist())


def test_all_32_behaviors_have_simulation_parameters(world: World) -> None:
    assert len(world.behaviors.ids) == 32
    assert int(world.behaviors.heldout.sum()) == 6
    assert world.behaviors.trigger.any(axis=1).all()


def test_episodes_respect_the_turn_budget(world: World) -> None:
    rng = np.random.default_rng(1)
    batch = training_batch(world, rng, 8, 4, 0.0, [0], 5)
    r = simulate(world, batch, RandomPolicy(), rng)
    assert r.features.turns.max() <= 5


def test_seed_bank_is_balanced_so_no_scenario_position_predicts_the_trigger(world: World) -> None:
    """A blind auditor naming a fixed position of the scenario (the lead topic) is right only at chance."""
    for seeds in (8, 12):
        w = World.build(load_behaviors(), seeds_per_behavior=seeds, fair_chance=0.75, random_state=3)
        k = w.scenario.shape[2]
        for b in range(len(w.behaviors.ids)):
            if (~w.behaviors.trigger[b]).sum() < k:  # too few decoys: the scenario must hold several triggers
                continue
            hits = w.behaviors.trigger[b][w.scenario[b]]
            assert hits.sum() == round(0.75 * seeds) and (hits.sum(axis=1) <= 1).all()
            per_position = hits.sum(axis=0)
            assert per_position.max() - per_position.min() <= 1
