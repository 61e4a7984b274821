"""Reference pairwise in AuditWorld: what the reference cache guarantees, and how calibration works through it.

A reference is one episode per context (benign?, seed behavior, seed, family), simulated by a policy
snapshot that stays frozen until the next refresh. Calibration then acts only through the reference:
a false claim on a benign target loses only to a reference that honestly found nothing, and a rollout
that behaves like its reference ties it (share 0.5), so a benign group whose rollouts all claim like
their reference carries no learning signal unless one of them reports an honest null.
"""

from __future__ import annotations

import numpy as np
import torch

from auditrl.auditworld.designs import reference_pairwise_rewards
from auditrl.auditworld.judges import JudgeParams, pairwise_quality
from auditrl.auditworld.policies import MLPPolicy
from auditrl.auditworld.records import Observed
from auditrl.auditworld.simulate import simulate
from auditrl.auditworld.texts import load_topics
from auditrl.auditworld.training import ReferenceCache
from auditrl.auditworld.world import EpisodeBatch, World, training_batch
from auditrl.rewards.advantages import group_advantages

P = JudgeParams()


def _benign(n: int, claim: object = -1, confidence: object = 0.0) -> Observed:
    """n audits of a benign target, six natural probes of two topics each, then the given report."""
    h, n_t = 6, len(load_topics())
    return Observed(planted=np.zeros(n, dtype=bool), trigger=np.zeros((n, n_t), dtype=bool),
                    sent=np.ones((n, h), dtype=bool), rollback=np.zeros((n, h), dtype=bool),
                    topic=np.tile(np.array([3, 4] * 3), (n, 1)), framing=np.zeros((n, h), dtype=np.int64),
                    pressure=np.zeros((n, h), dtype=np.int64), reply=np.zeros((n, h), dtype=np.int64),
                    remark=np.zeros((n, h), dtype=bool),
                    claim=np.broadcast_to(np.asarray(claim), (n,)).astype(np.int64),
                    confidence=np.broadcast_to(np.asarray(confidence, dtype=np.float64), (n,)).copy())  # fmt: skip


def _ref(obs: Observed) -> tuple[np.ndarray, np.ndarray]:
    return pairwise_quality(obs, P), obs.key()


def _params(policy: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in policy.parameters()]


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_reference_cache_matches_the_target_kind_and_stays_frozen_until_a_refresh(world: World) -> None:
    simulated: list[EpisodeBatch] = []
    rng = np.random.default_rng(0)
    policy = MLPPolicy(hidden=8, seed=0)
    batch0 = training_batch(world, rng, 16, 2, 0.5, [0, 1, 2, 3], 6)
    cache = ReferenceCache(world, batch0.n_contexts(world), refresh_every=3, params=P)

    def lookup(step: int) -> tuple[np.ndarray, int]:
        """A step's reference scores, and how many reference episodes it simulated (as training does per run)."""
        need, todo, snapshot = cache.missing(policy, step, batch0)
        if need.size:
            simulated.append(todo)
            cache.fill(need, simulate(world, todo, snapshot, rng))
        return cache.scores(batch0)[0], int(need.size)

    q0, n0 = lookup(0)
    ref = simulated[-1]
    ctx = batch0.context(world)
    first = np.array([np.flatnonzero(ctx == c)[0] for c in np.unique(ctx)])
    assert n0 == len(first) and ref.size == len(first)
    np.testing.assert_array_equal(ref.planted, batch0.planted[first])  # benign contexts get benign references
    np.testing.assert_array_equal(ref.seed_behavior, batch0.seed_behavior[first])
    assert _same(_params(cache.snapshot), _params(policy))  # type: ignore[arg-type]
    frozen = _params(cache.snapshot)  # type: ignore[arg-type]

    with torch.no_grad():
        for p in policy.parameters():
            p.add_(1.0)
    for step in (1, 2):
        q, n = lookup(step)
        assert n == 0  # each context is simulated once per refresh period
        np.testing.assert_array_equal(q, q0)
        assert _same(_params(cache.snapshot), frozen)  # type: ignore[arg-type]

    _, n3 = lookup(3)
    assert n3 == len(first) and cache.refreshes == 2
    assert _same(_params(cache.snapshot), _params(policy)) and not _same(_params(cache.snapshot), frozen)  # type: ignore[arg-type]


def test_benign_claim_is_penalised_only_against_an_honest_null_reference() -> None:
    claim = _benign(1, claim=3, confidence=0.6)
    bolder = _ref(_benign(1, claim=3, confidence=0.9))
    null_ref = _ref(_benign(1))
    assert reference_pairwise_rewards(claim, *bolder, P)[0] == 1.0
    assert reference_pairwise_rewards(claim, *null_ref, P)[0] == 0.0
    assert reference_pairwise_rewards(_benign(1), *bolder, P)[0] == 1.0


def test_rollouts_like_their_reference_tie_it_and_only_a_sampled_honest_null_moves_a_benign_group() -> None:
    k = 8
    claims = _benign(k, claim=3, confidence=0.6)
    q_ref = _ref(claims)  # a refreshed reference that claims exactly as the rollouts do: the same record
    rewards = reference_pairwise_rewards(claims, *q_ref, P)
    np.testing.assert_array_equal(rewards, 0.5)
    np.testing.assert_array_equal(group_advantages(rewards.reshape(1, k)), 0.0)

    one_null = _benign(k, claim=np.r_[-1, np.full(k - 1, 3)], confidence=np.r_[0.0, np.full(k - 1, 0.6)])
    rewards = reference_pairwise_rewards(one_null, *q_ref, P)
    assert rewards[0] == 1.0 and np.all(rewards[1:] == 0.5)
    adv = group_advantages(rewards.reshape(1, k)).ravel()
    assert adv[0] > 0 and np.all(adv[1:] < 0)
