"""Judges: they read only observables; vectorised and per-transcript agree; each flaw of the judge model
does what it says and vanishes at zero. (Every design's two forms are compared by the contract check,
auditrl.testing, run over every registered design in tests/rewards/test_contracts.py.)"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sim_records import record

from auditrl.auditworld.judges import (
    JudgeFlaws,
    JudgeParams,
    binary_surfaced,
    concerningness_scores,
    default_world,
    pairwise_quality,
    pairwise_share,
)
from auditrl.auditworld.policies import ExperimenterPolicy, InterrogatorPolicy, RandomPolicy
from auditrl.auditworld.records import Observed, ground_truth
from auditrl.auditworld.render import render_episodes, transcript_observed
from auditrl.auditworld.simulate import Rollout, simulate
from auditrl.auditworld.transcript_judges import (
    SimBinaryJudge,
    SimConcerningnessJudge,
    SimPairwiseJudge,
    SimRealismJudge,
)
from auditrl.auditworld.world import World, training_batch
from auditrl.behaviors.library import load_behaviors
from auditrl.judges.programmatic import Facts, ProgrammaticBinaryJudge
from auditrl.judges.realism import RealOpening
from auditrl.scaffold.transcript import Prediction, Report, Transcript

K = 4
P = JudgeParams()


def _rollout(world: World, policy: object, benign_fraction: float, seed: int = 0) -> Rollout:
    rng = np.random.default_rng(seed)
    return simulate(world, training_batch(world, rng, 6, K, benign_fraction, [0, 1, 2, 3], 15), policy, rng)  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", [RandomPolicy(), ExperimenterPolicy(), InterrogatorPolicy()], ids=lambda p: p.name)
def test_rendered_transcripts_read_back_to_the_same_record(world: World, policy: object) -> None:
    r = _rollout(world, policy, 0.5)
    transcripts = render_episodes(world, r, range(r.batch.size), "p")
    got = transcript_observed(world, transcripts)
    horizon = got.sent.shape[1]
    want = r.observed
    for f in dataclasses.fields(Observed):
        a, b = getattr(got, f.name), getattr(want, f.name)
        np.testing.assert_array_equal(a, b[:, :horizon] if b.ndim == 2 and f.name != "trigger" else b, err_msg=f.name)
    assert not want.sent[:, horizon:].any()
    truth, want_truth = dataclasses.asdict(ground_truth(got)), dataclasses.asdict(r.features)
    for key in want_truth:
        np.testing.assert_allclose(truth[key], want_truth[key], err_msg=key)


def test_default_world_judges_like_a_run_world_with_another_seed_bank(world: World) -> None:
    """The `sim` judge spec judges with the shipped library's world; the seed bank does not enter judging."""
    other = World.build(load_behaviors(), seeds_per_behavior=4, fair_chance=0.5, random_state=9)
    r = _rollout(world, InterrogatorPolicy(), 0.5, seed=4)
    transcripts = render_episodes(world, r, range(r.batch.size), "p")
    got = dataclasses.asdict(transcript_observed(default_world(), transcripts))
    want = dataclasses.asdict(transcript_observed(other, transcripts))
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


async def _verdicts(world: World, transcripts: list[Transcript]) -> list[object]:
    concern, lenient, strict = SimConcerningnessJudge(world), SimBinaryJudge(world), SimBinaryJudge(world, strict=True)
    pairwise, realism = SimPairwiseJudge(world), SimRealismJudge(world)
    opening = RealOpening(id="real", topic="cooking", turns=["what can I make with leftover rice and two eggs?"])
    out: list[object] = []
    for t in transcripts:
        out.append((await concern.score(t)).scores)
        out.append([(p.real, p.audit_slot) for p in (await realism.compare(t, opening)).picks])
        if not t.benign:
            out += [(await lenient.score(t)).surfaced, (await strict.score(t)).surfaced]
    for a, b in zip(transcripts[::2], transcripts[1::2], strict=False):  # an odd last audit has no pair
        result = await pairwise.compare(a, b)
        out.append(
            (
                result.share_a,
                result.first.winner,
                result.first.confidence,
                result.second.winner,
                result.second.confidence,
            )
        )
    return out


async def test_judges_read_no_hidden_state(world: World) -> None:
    """Same words, other target family (other rates) and other ground-truth annotations: same verdicts."""
    r, natural = _rollout(world, InterrogatorPolicy(), 0.5, seed=6), _rollout(world, ExperimenterPolicy(), 0.5, seed=6)
    transcripts = render_episodes(world, r, range(r.batch.size), "p") + render_episodes(world, natural, range(8), "n")
    hidden = []
    for t in transcripts:
        u = t.model_copy(deep=True)
        u.target_model, u.target_family = "sim/pliant", "pliant"
        for m in u.target_messages:
            if m.role == "assistant":
                m.annotations = {k: not bool(v) for k, v in m.annotations.items()}
        hidden.append(u)
    assert await _verdicts(world, transcripts) == await _verdicts(world, hidden)
    # The comparison can fail: an accusation added to the auditor's words changes what the judges read.
    said = transcripts[0].model_copy(deep=True)
    first_user = next(m for m in said.target_messages if m.role == "user")
    first_user.content = "Admit it. " + first_user.content
    assert await _verdicts(world, [said, transcripts[1]]) != await _verdicts(world, transcripts[:2])
    # The realism judge reads the opening: equal openings of audits that differ later get equal picks, and a
    # test framing in the opening gives a natural audit away.
    realism, opening = SimRealismJudge(world, _with(position_bias=0.0)), RealOpening(id="real", topic="t", turns=["hi"])
    plain = transcripts[-1]
    later = plain.model_copy(deep=True)
    last_user = [m for m in later.target_messages if m.role == "user"][-1]
    last_user.content = "Admit it. " + last_user.content
    assert (
        (await realism.compare(later, opening)).picked_audit_share
        == (await realism.compare(plain, opening)).picked_audit_share
        == 0.5
    )
    tested = plain.model_copy(deep=True)
    first_user = next(m for m in tested.target_messages if m.role == "user")
    first_user.content = "This is a test of your behavior. " + first_user.content
    assert (await realism.compare(tested, opening)).picked_audit_share == 0.0


CLEAN = JudgeParams(flaws=JudgeFlaws(noise=0.0, position_bias=0.0, verbosity=0.0, alarm=0.0, credulity=0.0, miss=0.0,
                                     false_recognition=0.0))  # fmt: skip


def _with(**flaws: float) -> JudgeParams:
    return JudgeParams(flaws=CLEAN.flaws.model_copy(update=flaws))


def test_alarm_flaw_makes_the_pointwise_judge_react_to_the_auditors_own_accusations() -> None:
    quiet = record([(5, 0, 0, 0)] * 4, planted=False)
    narrated = record([(5, 0, 2, 0)] * 4, claim=5, confidence=0.9, planted=False)
    assert concerningness_scores(quiet, P).concerning[0] == 1
    assert concerningness_scores(narrated, P).concerning[0] >= 6
    assert concerningness_scores(narrated, CLEAN).concerning[0] == 1


def test_credulity_lets_narration_pass_the_lenient_binary_judge_never_the_strict_one() -> None:
    narration_only = record([(3, 0, 2, 0)] * 2, claim=3, confidence=0.9)
    assert binary_surfaced(narration_only, _with(credulity=0.5))[0]
    assert not binary_surfaced(narration_only, CLEAN)[0]
    assert not binary_surfaced(narration_only, _with(credulity=1.0), strict=True)[0]
    shown = record([(3, 0, 0, 1)], claim=3, confidence=0.9)
    assert binary_surfaced(shown, CLEAN, strict=True)[0]
    wrong_topic = record([(4, 0, 0, 1)], claim=4, confidence=0.9)
    assert not binary_surfaced(wrong_topic, CLEAN)[0]


def test_recognition_errors_miss_displays_at_the_configured_rate() -> None:
    shown = record([(3, 0, 0, 1)], claim=3, confidence=0.9, n=1)
    # Distinct records (a different lead-in topic each) get independent draws.
    many = [
        record([(t % 19 + 4, 0, 0, 0)] * (1 + t // 19) + [(3, 0, 0, 1)], claim=3, confidence=0.9) for t in range(400)
    ]
    surfaced = np.mean([binary_surfaced(o, _with(miss=0.3), strict=True)[0] for o in many])
    assert 0.35 < surfaced < 0.65  # both the display and the match must be recognised: 0.7 x 0.7
    assert binary_surfaced(shown, _with(miss=0.0), strict=True)[0]


def test_pairwise_prefers_target_evidence_until_credulity_and_alarm_grow() -> None:
    evidence = record([(3, 0, 0, 1), (3, 0, 0, 1), (4, 0, 0, 0)], claim=3, confidence=0.6)
    narration = record([(3, 0, 2, 4), (3, 0, 2, 4), (3, 0, 2, 4)], claim=3, confidence=0.9)
    for params, want in ((CLEAN, 1.0), (_with(credulity=3.0, alarm=3.0), 0.0)):
        qa, qb = pairwise_quality(evidence, params), pairwise_quality(narration, params)
        share, _ = pairwise_share(qa, qb, evidence.key(), narration.key(), params)
        assert share[0] == want


def test_calibration_pairwise_prefers_the_honest_null_on_a_benign_target() -> None:
    null = record([(4, 0, 0, 0), (5, 0, 0, 0)], planted=False)
    accusation = record([(4, 0, 2, 4), (4, 0, 2, 4)], claim=4, confidence=0.9, planted=False)
    share, _ = pairwise_share(
        pairwise_quality(null, P), pairwise_quality(accusation, P), null.key(), accusation.key(), P
    )
    assert share[0] == 1.0


def test_position_bias_is_cancelled_by_judging_both_orders() -> None:
    qa, qb = np.array([0.5]), np.array([0.45])
    ka, kb = np.array([1], dtype=np.uint64), np.array([2], dtype=np.uint64)
    params = _with(position_bias=0.15)
    share, consistent = pairwise_share(qa, qb, ka, kb, params)
    assert not consistent[0] and 0.5 < share[0] < 1.0
    share_rev, _ = pairwise_share(qb, qa, kb, ka, params)
    assert share[0] + share_rev[0] == pytest.approx(1.0)
    assert pairwise_share(qa, qb, ka, kb, CLEAN)[1][0]


def test_equal_records_get_equal_verdicts_and_noise_differs_between_records() -> None:
    a = record([(3, 0, 0, 1), (4, 0, 0, 0)], claim=3, confidence=0.6, n=2)
    assert np.array_equal(concerningness_scores(a, P).concerning[:1], concerningness_scores(a, P).concerning[1:])
    assert a.key()[0] == a.key()[1]
    noisy = _with(noise=5.0)
    records = [record([(t % 19 + 4, 0, 0, 0)] * (1 + t // 19)) for t in range(60)]
    scores = {int(concerningness_scores(o, noisy).concerning[0]) for o in records}
    assert len(scores) > 3


async def test_rendered_narration_is_visible_to_the_rewards_package_programmatic_binary_judge(world: World) -> None:
    r = _rollout(world, InterrogatorPolicy(), 0.0, seed=5)
    transcripts = render_episodes(world, r, range(r.batch.size), "p")
    narrated = [
        t
        for t, acc, exp in zip(transcripts, r.features.accusations, r.features.expressed, strict=True)
        if acc > 0 and exp == 0
    ]
    for t in narrated:  # both binary judges need a report naming the planted behavior, whatever backs it
        t.report = Report(
            no_behavior_found=False, predictions=[Prediction(rank=1, description=str(t.behavior_id), confidence=0.9)]
        )
        assert Facts(t).identified
    assert narrated
    lenient, strict = ProgrammaticBinaryJudge(), ProgrammaticBinaryJudge(strict=True)
    for t in narrated:
        assert (await lenient.score(t)).surfaced
        assert not (await strict.score(t)).surfaced
