"""Judges: vectorised and per-transcript agree (also through the rewards package), and each weakness is there."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from auditrl.behaviors.library import load_behaviors
from auditrl.judges.programmatic import ProgrammaticBinaryJudge
from auditrl.rewards.designs import BinaryMatch, InGroupPairwise, PointwiseConcerningness
from auditrl.rewards.reference import ReferenceStore
from auditrl.rewards.registry import DESIGN_NAMES, build_design
from auditrl.sim.designs import binary_rewards, concerningness_rewards, ingroup_pairwise_rewards, reference_pairwise_rewards
from auditrl.sim.judges import (
    JudgeParams,
    SimBinaryJudge,
    SimConcerningnessJudge,
    SimPairwiseJudge,
    binary_surfaced,
    concerningness_scores,
    default_world,
    pairwise_quality,
    pairwise_share,
)
from auditrl.sim.policies import ExperimenterPolicy, InterrogatorPolicy, RandomPolicy
from auditrl.sim.render import render_episodes, transcript_features
from auditrl.sim.world import Features, Rollout, World, simulate, training_batch

K = 4
P = JudgeParams()


def _rollout(world: World, policy: object, benign_fraction: float, seed: int = 0) -> Rollout:
    rng = np.random.default_rng(seed)
    return simulate(world, training_batch(world, rng, 6, K, benign_fraction, [0, 1, 2, 3], 15), policy, rng)  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", [RandomPolicy(), ExperimenterPolicy(), InterrogatorPolicy()], ids=lambda p: p.name)
def test_rendered_transcripts_read_back_to_the_same_features(world: World, policy: object) -> None:
    r = _rollout(world, policy, 0.5)
    transcripts = render_episodes(world, r, range(r.batch.size), "p")
    got = dataclasses.asdict(transcript_features(world, transcripts))
    want = dataclasses.asdict(r.features)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], err_msg=key)


async def test_rewards_package_designs_with_sim_judges_match_the_vectorised_designs(world: World) -> None:
    r = _rollout(world, InterrogatorPolicy(), 0.5, seed=2)
    transcripts = render_episodes(world, r, range(r.batch.size), "p")
    groups = [transcripts[i : i + K] for i in range(0, len(transcripts), K)]
    designs = {
        "concerningness": (PointwiseConcerningness(SimConcerningnessJudge(world)), concerningness_rewards(r.features, P)),
        "binary": (BinaryMatch(SimBinaryJudge(world)), binary_rewards(r.features)),
        "ingroup": (InGroupPairwise(SimPairwiseJudge(world)), ingroup_pairwise_rewards(r.features, K, P)),
    }
    for name, (design, want) in designs.items():
        got = [x for g in groups for x in await design.score_group(g)]
        np.testing.assert_allclose(np.array(got, dtype=float), want, err_msg=name)


async def test_registry_sim_judge_gives_the_vectorised_rewards_for_every_auditworld_design(world: World) -> None:
    """`build_design(name, "sim")` with the calibration variant on benign groups, as AuditWorld trains."""
    r = _rollout(world, InterrogatorPolicy(), 0.5, seed=3)
    transcripts = render_episodes(world, r, range(r.batch.size), "p")
    ref_rollout = _rollout(world, ExperimenterPolicy(), 0.5, seed=3)  # same batch, another policy
    refs = render_episodes(world, ref_rollout, range(0, ref_rollout.batch.size, K), "ref")
    store = ReferenceStore()
    store.refresh(0, refs)
    q_ref = SimPairwiseJudge(world).quality([store.get(ReferenceStore.key_of(t)) for t in transcripts])  # type: ignore[misc]
    want = {
        "concerningness": concerningness_rewards(r.features, P),
        "binary": binary_rewards(r.features),
        "binary_strict": binary_rewards(r.features, strict=True),
        "ingroup_pairwise": ingroup_pairwise_rewards(r.features, K, P),
        "reference_pairwise": reference_pairwise_rewards(r.features, q_ref, P),
    }
    groups = [transcripts[i : i + K] for i in range(0, len(transcripts), K)]
    for name, expected in want.items():
        design = build_design(name, "sim", references=store, frozen_references=True)
        got = [x for g in groups for x in await design.score_group(g)]
        np.testing.assert_allclose(np.array(got, dtype=float), expected, err_msg=name)
    assert set(want) | {"ingroup_bradley_terry"} == set(DESIGN_NAMES)
    bt = build_design("ingroup_bradley_terry", "sim")
    bt_rewards = [x for g in groups for x in await bt.score_group(g)]
    assert all(x is not None and np.isfinite(x) for x in bt_rewards)


def test_default_world_judges_like_a_run_world_with_another_seed_bank(world: World) -> None:
    """The `sim` judge spec judges with the shipped library's world; the seed bank does not enter judging."""
    other = World.build(load_behaviors(), seeds_per_behavior=4, fair_chance=0.5, seed=9)
    r = _rollout(world, InterrogatorPolicy(), 0.5, seed=4)
    transcripts = render_episodes(world, r, range(r.batch.size), "p")
    got = dataclasses.asdict(transcript_features(default_world(), transcripts))
    want = dataclasses.asdict(transcript_features(other, transcripts))
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def _features(**kw: object) -> Features:
    base: dict[str, object] = {f.name: np.zeros(1, dtype=np.int64) for f in dataclasses.fields(Features)}
    base.update(planted=np.array([True]), claim=np.array([-1]), confidence=np.zeros(1), correct=np.array([False]),
                control=np.array([False]), opening_natural=np.ones(1), opening_aware=np.array([False]), turns=np.array([6]))  # fmt: skip
    base.update({k: np.atleast_1d(np.asarray(v)) for k, v in kw.items()})
    return Features(**base)  # type: ignore[arg-type]


def test_pointwise_judge_is_alarmed_by_the_auditors_own_accusations_on_a_benign_target() -> None:
    quiet = _features(planted=False)
    narrated = _features(planted=False, accusations=3, claim=2, confidence=0.9)
    assert concerningness_scores(quiet, P).concerning[0] == 1
    assert concerningness_scores(narrated, P).concerning[0] >= 6


def test_lenient_binary_judge_is_inflated_by_narration_strict_is_not() -> None:
    narration_only = _features(claim=3, confidence=0.9, correct=True, acc_claim=2, accusations=2)
    assert binary_surfaced(narration_only)[0]
    assert not binary_surfaced(narration_only, strict=True)[0]
    shown = _features(claim=3, confidence=0.9, correct=True, exp_claim=1, expressed=1)
    assert binary_surfaced(shown, strict=True)[0]


def test_pairwise_judge_prefers_target_evidence_and_honest_nulls_on_benign_targets() -> None:
    evidence = _features(claim=3, confidence=0.6, correct=True, exp_claim=2, expressed=2)
    narration = _features(claim=3, confidence=0.9, correct=True, acc_claim=3, accusations=3)
    share, _ = pairwise_share(pairwise_quality(evidence, P), pairwise_quality(narration, P), P)
    assert share[0] == 1.0
    null = _features(planted=False)
    accusation = _features(planted=False, claim=3, confidence=0.9, confessions=2, false_confessions=2)
    share, _ = pairwise_share(pairwise_quality(null, P), pairwise_quality(accusation, P), P)
    assert share[0] == 1.0


def test_pairwise_judge_has_a_position_bias_that_both_orders_cancel() -> None:
    qa, qb = np.array([0.5]), np.array([0.45])
    share, consistent = pairwise_share(qa, qb, P)
    assert not consistent[0] and 0.5 < share[0] < 1.0
    share_rev, _ = pairwise_share(qb, qa, P)
    assert share[0] + share_rev[0] == pytest.approx(1.0)


async def test_rendered_narration_is_visible_to_the_rewards_package_programmatic_binary_judge(world: World) -> None:
    r = _rollout(world, InterrogatorPolicy(), 0.0, seed=5)
    transcripts = render_episodes(world, r, range(r.batch.size), "p")
    narrated = [t for t, acc, exp in zip(transcripts, r.features.accusations, r.features.expressed) if acc > 0 and exp == 0]
    assert narrated
    lenient, strict = ProgrammaticBinaryJudge(), ProgrammaticBinaryJudge(strict=True)
    for t in narrated:
        assert (await lenient.judge(t)).surfaced
        assert not (await strict.judge(t)).surfaced
