from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
import torch

from auditrl.auditworld.base import ImitationInit, RandomInit, imitation_base
from auditrl.auditworld.designs import binary_rewards
from auditrl.auditworld.judges import JudgeParams
from auditrl.auditworld.policies import Adam, MLPPolicy, RandomPolicy
from auditrl.auditworld.simulate import Rollout, simulate
from auditrl.auditworld.training import TrainConfig, policy_gradient, train
from auditrl.auditworld.world import CLAIM, END, NO_CLAIM, TOOL, World, training_batch

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


@pytest.mark.parametrize(
    "design,benign", [("concerningness", 0.0), ("ingroup_pairwise", 0.0), ("reference_pairwise", 0.5)]
)
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
    cfg = TrainConfig(design="ingroup_pairwise", max_steps=2, groups_per_step=4, group_size=4, hidden=8,
                      families=FAMILIES, init=init)  # fmt: skip
    result = train(world, cfg, base=base)
    assert all((before[k] == v).all() for k, v in base.state_dict().items())
    assert result.history[0].claim_rate == train(world, cfg, base=base).history[0].claim_rate
    # The first step's rollouts are the base's own: another base gives other first-step audits.
    other = train(world, cfg.model_copy(update={"init": RANDOM}))
    assert [s.turns for s in other.history] != [s.turns for s in result.history]


def test_a_run_is_the_same_whatever_torch_s_thread_count_and_leaves_it_as_it_was(
    world: World, same_at_one_and_two_threads: Callable[[Callable[[], MLPPolicy]], bool]
) -> None:
    """Sized so the update's products span thousands of rows, which torch splits among threads when it has several
    (a different summation order, which steps compound)."""
    init = ImitationInit(kind="imitation", audits_per_round=64, fit_steps=100)
    base = imitation_base(world, init, 32, 0, [0, 1, 2, 3])
    cfg = TrainConfig(design="binary", max_steps=5, groups_per_step=64, hidden=32, families=FAMILIES, init=init)
    assert same_at_one_and_two_threads(lambda: train(world, cfg, base=base).policy)


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
            f.accusations.mean(),
            f.confessions.mean(),
            f.eval_aware.mean(),
            f.turns.mean(),
        )


def _autograd_loss(policy: MLPPolicy, rollout: Rollout, advantages: np.ndarray, entropy_coef: float) -> torch.Tensor:
    """The REINFORCE loss of `policy_gradient` written head by head in torch, for autograd to differentiate."""
    n_act = len(policy.action_sizes)
    episode, turn = np.nonzero(rollout.acted)
    actions = torch.from_numpy(rollout.actions[episode, turn])
    report = torch.from_numpy(rollout.report)
    logits_turns = policy(torch.from_numpy(rollout.obs[episode, turn]))
    logits_report = policy(torch.from_numpy(rollout.final_obs))
    sent = (actions[:, TOOL] != END).float()
    claimed = (report[:, CLAIM] != NO_CLAIM).float()
    turns = torch.from_numpy(np.maximum(rollout.acted.sum(axis=1), 1)).float()
    owner = torch.from_numpy(episode)
    n = rollout.acted.shape[0]
    log_prob, entropy = torch.zeros(n), torch.zeros(n)
    offsets = np.concatenate([[0], np.cumsum(policy.head_sizes)])
    for h in range(len(policy.head_sizes)):
        is_turn = h < n_act
        logits = (logits_turns if is_turn else logits_report)[:, offsets[h] : offsets[h + 1]]
        logp = torch.log_softmax(logits, dim=1)
        chosen = (actions[:, h] if is_turn else report[:, h - n_act]).unsqueeze(1)
        used = torch.ones(len(logits)) if h in (TOOL, n_act) else sent if is_turn else claimed
        ent = -(logp.exp() * logp).sum(1) * (used if h != n_act + 1 else 0.0)
        lp = logp.gather(1, chosen).squeeze(1) * used
        if is_turn:
            log_prob = log_prob.index_add(0, owner, lp)
            entropy = entropy.index_add(0, owner, ent / turns[owner])
        else:
            log_prob, entropy = log_prob + lp, entropy + ent
    return -(torch.from_numpy(advantages).float() * log_prob).mean() - entropy_coef * entropy.mean()


def _assert_autograd_gradient(policy: MLPPolicy, rollout: Rollout, advantages: np.ndarray) -> None:
    loss, grads = policy_gradient(policy, rollout, advantages, 0.05)
    expected = _autograd_loss(policy, rollout, advantages, 0.05)
    policy.zero_grad()
    expected.backward()
    assert loss == pytest.approx(float(expected.detach()), abs=1e-5)
    for (name, param), grad in zip(policy.named_parameters(), grads, strict=True):
        assert grad.shape == tuple(param.shape), name
        np.testing.assert_allclose(grad, param.grad.numpy(), atol=1e-5, err_msg=name)


def test_the_numpy_policy_gradient_equals_autograd_on_the_same_loss(world: World) -> None:
    """With the rollout's own forward pass, with none kept, and after the policy has moved on (the kept pass is
    then stale and must not be used): each time the gradient of the loss at the policy's current weights."""
    init = ImitationInit(kind="imitation", dagger_rounds=0, audits_per_round=32, turn_budgets=[8], fit_steps=30)
    policy = imitation_base(world, init, 8, 0, [0, 1])
    rng = np.random.default_rng(0)
    rollout = simulate(world, training_batch(world, rng, 16, 4, 0.5, [0, 1], 10), policy, rng)
    assert rollout.report[:, CLAIM].max() > NO_CLAIM and (rollout.actions[rollout.acted][:, TOOL] == END).any()
    assert rollout.activations is not None and rollout.activations.current(policy)
    advantages = rng.normal(size=rollout.acted.shape[0])
    _assert_autograd_gradient(policy, rollout, advantages)
    _assert_autograd_gradient(policy, dataclasses.replace(rollout, activations=None), advantages)
    opt = Adam(policy.weight_views(), 0.05)
    opt.step(policy_gradient(policy, rollout, advantages, 0.05)[1])
    assert not rollout.activations.current(policy)
    _assert_autograd_gradient(policy, rollout, advantages)


@pytest.mark.parametrize("max_norm", [0.05, 100.0])
def test_the_numpy_adam_follows_torch_adam_after_gradient_clipping(max_norm: float) -> None:
    rng = np.random.default_rng(3)
    shapes = [(4, 3), (4,)]
    mine = [rng.normal(size=s).astype(np.float32) for s in shapes]
    theirs = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in mine]
    ours, opt = Adam(mine, lr=0.01), torch.optim.Adam(theirs, lr=0.01)
    for _ in range(5):
        grads = [rng.normal(size=s).astype(np.float32) for s in shapes]
        for p, g in zip(theirs, grads, strict=True):
            p.grad = torch.from_numpy(g.copy())
        torch.nn.utils.clip_grad_norm_(theirs, max_norm)
        opt.step()
        ours.step(grads, max_norm)
    for a, b in zip(mine, theirs, strict=True):
        np.testing.assert_allclose(a, b.detach().numpy(), atol=1e-6)


def test_runs_trained_in_lockstep_equal_runs_trained_alone(world: World) -> None:
    """`train_many` shares each step's rollout among runs; every run still draws, rewards and updates as it would
    alone, so its monitors and final weights are the same, whatever runs it is stepped with."""
    from auditrl.auditworld.training import train_many

    shared = dict(groups_per_step=6, group_size=4, hidden=8, families=FAMILIES, init=RANDOM, reference_refresh_steps=2)
    cfgs = [
        TrainConfig(design="binary", max_steps=4, benign_fraction=0.5, seed=0, **shared),
        TrainConfig(design="reference_pairwise", max_steps=3, seed=1, **shared),
        TrainConfig(design="concerningness", max_steps=4, seed=2, **shared),
    ]
    together = train_many(world, cfgs)
    for cfg, joint in zip(cfgs, together, strict=True):
        alone = train(world, cfg)
        np.testing.assert_equal(
            [dataclasses.asdict(s) for s in joint.history], [dataclasses.asdict(s) for s in alone.history]
        )
        assert len(joint.history) == cfg.max_steps
        assert all(torch.equal(a, b) for a, b in zip(joint.policy.parameters(), alone.policy.parameters(), strict=True))


def test_a_joint_rollout_gives_each_policy_the_rollout_it_would_have_alone(world: World) -> None:
    from auditrl.auditworld.policies import ExperimenterPolicy
    from auditrl.auditworld.simulate import simulate_many

    rng = np.random.default_rng(0)
    batches = [training_batch(world, rng, g, 4, 0.5, [0, 1, 2, 3], 12) for g in (5, 3, 6)]
    policies = [MLPPolicy(hidden=8, seed=0), ExperimenterPolicy(), MLPPolicy(hidden=8, seed=1)]
    joint = simulate_many(world, batches, policies, [np.random.default_rng(s) for s in (1, 2, 3)])
    for b, p, s, together in zip(batches, policies, (1, 2, 3), joint, strict=True):
        alone = simulate(world, b, p, np.random.default_rng(s))
        for f in dataclasses.fields(alone.observed):
            assert np.array_equal(getattr(together.observed, f.name), getattr(alone.observed, f.name)), f.name
        assert np.array_equal(together.turn_obs, alone.turn_obs)
        assert np.array_equal(together.turn_episode, alone.turn_episode)
        assert np.array_equal(together.report, alone.report)
    with pytest.raises(ValueError, match="one turn budget"):
        simulate_many(world, [batches[0], training_batch(world, rng, 2, 4, 0.0, [0], 9)], policies[:2], [rng, rng])
