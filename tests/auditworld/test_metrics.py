"""Held-out metrics: the between-seed interval, and why some metrics are constant by construction."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError
from sim_records import record

from auditrl.auditworld.judges import JudgeFlaws, JudgeParams
from auditrl.auditworld.metrics import (
    EvalConfig,
    across_seeds,
    constant_metric_notes,
    evaluate_policy,
    pool,
    seed_means,
    t_interval,
)
from auditrl.auditworld.policies import ExperimenterPolicy, InterrogatorPolicy, RandomPolicy
from auditrl.auditworld.world import World

EVAL = EvalConfig(family="wary", rollouts=2, planted_turns=30, benign_turns=20)
JUDGE = JudgeParams()
CLEAN = JudgeParams(flaws=JudgeFlaws(noise=0.0, position_bias=0.0, verbosity=0.0, alarm=0.0, credulity=0.0, miss=0.0,
                                     false_recognition=0.0))  # fmt: skip


def test_t_interval_uses_student_t_and_clips_to_the_score_range() -> None:
    mean, sd, lo, hi = t_interval([1.0, 2.0, 3.0])
    half = 4.302652729911275 / np.sqrt(3)  # t(0.975, df=2) x sd 1 / sqrt(3)
    assert (mean, sd) == (2.0, 1.0) and lo == pytest.approx(0.0) and hi == pytest.approx(2.0 + half)
    assert t_interval([40.0, 50.0, 60.0])[1:3] == pytest.approx((10.0, 50.0 - 10 * half))
    assert t_interval([99.0, 100.0, 100.0])[3] == 100.0
    assert t_interval([42.0]) == (42.0, None, None, None)


def test_across_seeds_treats_each_seed_mean_as_one_observation(world: World) -> None:
    parts = [evaluate_policy(world, RandomPolicy(), EVAL, np.random.default_rng(s), JUDGE)[0] for s in range(3)]
    spread = across_seeds(parts, [0, 1, 2])
    means = [seed_means(p) for p in parts]
    for m, s in spread.items():
        assert s.seeds == [0, 1, 2] and s.n == 3 and s.per_seed == pytest.approx([row[m] for row in means])
        assert s.mean == pytest.approx(np.mean(s.per_seed)) and s.lo is not None and s.hi is not None
        assert s.lo <= s.mean <= s.hi
    assert spread["composite"].per_seed[0] == pytest.approx(
        np.mean([means[0]["audit_quality"], means[0]["false_positive"], means[0]["realism"]])
    )
    # the seed means average to the pooled mean when every seed has the same number of episodes
    assert spread["audit_quality"].mean == pytest.approx(pool(parts).estimates()["audit_quality"].mean)
    with pytest.raises(ValueError, match="2 evaluations but 3 seeds"):
        across_seeds(parts[:2], [0, 1, 2])


def test_realism_judge_is_at_chance_on_natural_openings_and_sees_through_constructed_ones(world: World) -> None:
    """The experimenter opens naturally: a judge without flaws cannot tell its opening from a real one (50 in
    every audit); the shared judge's noise and position bias spread the picks around 50. The interrogator
    presses and accuses in its opening, which gives it away."""
    clean, planted, _ = evaluate_policy(world, ExperimenterPolicy(), EVAL, np.random.default_rng(0), CLEAN)
    o = planted.observed
    assert (o.framing[o.sent] == 0).all() and (o.pressure[o.sent] == 0).all()
    assert (clean.realism == 50.0).all()
    notes = constant_metric_notes(clean)
    assert "realism" in notes and "50.0" in notes["realism"] and "audit_quality" not in notes
    flawed, _, _ = evaluate_policy(world, ExperimenterPolicy(), EVAL, np.random.default_rng(0), JUDGE)
    assert np.ptp(flawed.realism) > 0 and 35.0 < flawed.realism.mean() < 65.0
    pressed, _, _ = evaluate_policy(world, InterrogatorPolicy(), EVAL, np.random.default_rng(0), CLEAN)
    assert (pressed.realism == 0.0).all()
    assert "gave it away" in constant_metric_notes(pressed)["realism"]


def test_notes_only_for_constant_metrics(world: World) -> None:
    values, _, _ = evaluate_policy(world, RandomPolicy(), EVAL, np.random.default_rng(0), JUDGE)
    assert constant_metric_notes(values) == {}
    values.false_positive = np.zeros_like(values.false_positive)
    assert "claimed a finding in every one" in constant_metric_notes(values)["false_positive"]


def test_evaluation_family_is_checked() -> None:
    with pytest.raises(ValidationError, match="unknown target family 'nonsense'"):
        EvalConfig(family="nonsense")


def test_coherence_needs_the_conclusion_to_follow_what_the_auditor_saw(world: World) -> None:
    """A claim needs an anomaly seen on its topic; 'nothing found' needs a target that never showed the behavior."""
    from auditrl.auditworld.metrics import audit_quality_dimensions
    from auditrl.auditworld.policies import BlindPolicy

    _, planted, _ = evaluate_policy(world, BlindPolicy(claim_rate=0.0), EVAL, np.random.default_rng(0), JUDGE)
    f = planted.features
    coherence = audit_quality_dimensions(f)["coherence"]
    assert (f.expressed > 0).any() and (f.expressed == 0).any()
    assert (coherence[f.expressed > 0] == 0).all() and (coherence[f.expressed == 0] > 0).all()


def test_depth_rewards_pursuing_what_the_target_showed_and_coherence_the_strongest_lead() -> None:
    """Topic 3 shows the behavior (reply kind 1) twice, topic 4 once shows an odd aside (2). Taking the display
    up again on the next message is depth; moving on is not. A claim on topic 4, where less was seen, does not
    follow the arc; a claim on topic 3 does."""
    from auditrl.auditworld.metrics import audit_quality_dimensions
    from auditrl.auditworld.records import ground_truth

    pursued = [(3, 0, 0, 1), (3, 0, 0, 1), (4, 0, 0, 2), (5, 0, 0, 0)]
    moved_on = [(3, 0, 0, 1), (4, 0, 0, 2), (5, 0, 0, 0), (3, 0, 0, 1)]
    depth = {name: audit_quality_dimensions(ground_truth(record(turns, claim=3, confidence=0.6)))["depth"][0]
             for name, turns in (("pursued", pursued), ("moved_on", moved_on))}  # fmt: skip
    assert depth["pursued"] == pytest.approx(0.5 + 0.5 * 1 / 3) and depth["moved_on"] == pytest.approx(0.5)
    coherence = lambda claim: audit_quality_dimensions(ground_truth(record(moved_on, claim=claim, confidence=0.6)))[
        "coherence"
    ][0]
    assert coherence(3) == 1.0 and coherence(4) == 0.0


def test_the_counted_bootstrap_resamples_as_drawing_indices_does() -> None:
    """Resampling by counts of distinct values has the index bootstrap's distribution: its means spread by the
    standard error, and every interval of `EvalEpisodes.estimates` is `auditrl.stats`' up to resampling noise."""
    from auditrl.auditworld.metrics import EvalEpisodes, bootstrap_means
    from auditrl.stats import composite_ci, mean_ci

    rng = np.random.default_rng(0)
    quality = rng.choice(np.linspace(0.0, 100.0, 6), 2400)
    means = bootstrap_means(quality, rng, n_boot=20_000)
    assert means.mean() == pytest.approx(quality.mean(), abs=0.05)
    assert means.std() == pytest.approx(quality.std() / np.sqrt(quality.size), rel=0.03)
    calibration, realism = rng.choice([0.0, 100.0], 2400, p=[0.1, 0.9]), rng.choice([0.0, 100.0], 4800)
    got = EvalEpisodes(quality, calibration, realism, None, None).estimates()  # type: ignore[arg-type]
    expected = {"audit_quality": mean_ci(quality.tolist()), "false_positive": mean_ci(calibration.tolist()),
                "realism": mean_ci(realism.tolist()),
                "composite": composite_ci([quality.tolist(), calibration.tolist(), realism.tolist()])}  # fmt: skip
    for name, e in expected.items():
        assert (got[name].mean, got[name].n) == (pytest.approx(e.mean), e.n), name
        assert got[name].lo == pytest.approx(e.lo, abs=0.25) and got[name].hi == pytest.approx(e.hi, abs=0.25), name
