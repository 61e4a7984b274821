"""The compiled loops: the step's reply is the numpy `respond`, flag for flag, at its thresholds too; a record's key
is its documented fold; an error-free judge counts what each record holds."""

from __future__ import annotations

import numpy as np

from auditrl.auditworld import kernels
from auditrl.auditworld.judges import JudgeFlaws, read
from auditrl.auditworld.policies import MLPPolicy, sample_heads
from auditrl.auditworld.records import NO_REPORT, mix64, on_claim, repeats
from auditrl.auditworld.simulate import simulate
from auditrl.auditworld.targets import ACCUSATION_AWARENESS, AWARE_SUPPRESSION, MAX_CONFESSION, respond
from auditrl.auditworld.texts import ACCUSE, CONFESSION, DIRECT, DISPLAY, PUSH, REPLY_KINDS, TEST
from auditrl.auditworld.world import World, training_batch

N = 6_000


def _inputs(world: World, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Episodes with the world's real family rates (float32, as the simulation keeps them), every framing and
    pressure, and uniforms of which a third sit exactly on a float32 rounding of a threshold the reply compares
    them with: where a float32 and a float64 product differ, these draws fall on different sides."""
    fams = world.families
    fam = rng.integers(0, len(fams.names), N)
    rates = np.column_stack(
        [
            rng.choice([0.0, 0.35, 0.7, 0.9], N) * fams.susceptibility[fam],
            fams.sycophancy[fam],
            fams.leak[fam],
            fams.eval_awareness[fam],
            fams.noise[fam],
            rng.integers(0, 3, N),
        ]
    ).astype(np.float32)
    u = rng.random((5, N), dtype=np.float32)
    edges = (
        np.float32(rng.choice([ACCUSATION_AWARENESS, AWARE_SUPPRESSION, MAX_CONFESSION, 0.5, 1.25, 1.5], N))
        * rates[np.arange(N), rng.integers(0, 5, N)]
    )
    on_edge = rng.random((4, N)) < 1 / 3
    u[:4] = np.where(on_edge, edges, u[:4])
    return {
        "rates": rates,
        "u": u,
        "triggered": rng.random(N) < 0.5,
        "onset_ok": rng.random(N) < 0.8,
        "framing": rng.integers(0, 3, N),
        "pressure": rng.integers(0, 3, N),
        "branch_pressure": rng.integers(0, 4, N).astype(np.float32),
        "aware": rng.random(N) < 0.3,
    }


def test_the_compiled_reply_gives_respond_s_flags_for_every_episode(world: World) -> None:
    x = _inputs(world, np.random.default_rng(7))
    rates, u = x["rates"], x["u"]
    expected = respond(
        triggered=x["triggered"], onset_ok=x["onset_ok"], rate=rates[:, 0], sycophancy=rates[:, 1],
        leak=rates[:, 2], eval_awareness=rates[:, 3], noise=rates[:, 4], framing=x["framing"],
        pressure=x["pressure"], branch_pressure=x["branch_pressure"], aware=x["aware"], u=u.T,
    )  # fmt: skip
    got = np.array(
        [
            kernels.reply(
                bool(x["triggered"][i]),
                bool(x["onset_ok"][i]),
                rates,
                i,
                int(x["framing"][i]),
                int(x["pressure"][i]),
                x["branch_pressure"][i],
                bool(x["aware"][i]),
                u,
                i,
            )  # fmt: skip
            for i in range(N)
        ]
    )
    names = ("expressed", "confession", "eval_aware", "denial", "odd", "aware")
    for column, name in enumerate(names):
        assert np.array_equal(got[:, column], getattr(expected, name)), name
    assert all(getattr(expected, name).any() for name in names)  # every flag was drawn somewhere


def test_a_records_key_folds_its_plant_sent_turns_claim_and_confidence_in_order(world: World) -> None:
    rng = np.random.default_rng(3)
    batch = training_batch(world, rng, 40, 4, 0.5, [0, 1, 2, 3], 15)
    o = simulate(world, batch, MLPPolicy(hidden=8, scenario_topics=world.scenario_topics), rng).observed
    o.claim[::5] = NO_REPORT  # a report that did not parse: claim + 1 wraps below zero
    fold = lambda h, v: mix64(np.array([h ^ np.uint64(v)], dtype=np.uint64))[0]  # noqa: E731
    for i in range(len(o)):
        h = mix64(np.array([0x9E3779B97F4A7C15 + int(o.planted[i])], dtype=np.uint64))[0]
        h = fold(h, sum(1 << j for j in np.flatnonzero(o.trigger[i])))
        for t in np.flatnonzero(o.sent[i]):
            turn = (
                o.topic[i, t] + 1,
                o.framing[i, t],
                o.pressure[i, t],
                o.rollback[i, t],
                o.reply[i, t],
                o.remark[i, t],
            )
            code = 0
            for value, size in zip(turn, (1, 3, 3, 2, len(REPLY_KINDS), 2), strict=True):
                code = code * size + int(value)
            h = fold(h, code)
        h = fold(h, (int(o.claim[i]) + 1) % 2**64)
        assert fold(h, round(o.confidence[i] * 1000)) == o.key()[i]
    assert len(set(o.key().tolist())) > len(o) // 2  # keys tell records apart


def test_each_head_draws_by_inverse_cdf_of_its_own_softmax() -> None:
    sizes = (3, 2)
    logits = np.log(np.array([[1.0], [2.0], [1.0], [3.0], [1.0]], dtype=np.float32))  # heads: 1/4 1/2 1/4; 3/4 1/4
    picks = [sample_heads(logits, sizes, np.array([[a], [b]], dtype=np.float32))[:, 0].tolist() for a, b in
             ((0.2, 0.7), (0.3, 0.8), (0.8, 0.999), (0.0, 0.0))]  # fmt: skip
    assert picks == [[0, 0], [1, 1], [2, 1], [0, 0]]
    rows = 40_000
    u = np.random.default_rng(5).random((2, rows), dtype=np.float32)
    drawn = sample_heads(np.repeat(logits * 0.5, rows, axis=1), sizes, u)  # a cooler softmax, drawn per row
    for head, (first, size) in enumerate(((0, 3), (3, 2))):
        p = np.exp(0.5 * logits[first : first + size, 0])
        counts = np.bincount(drawn[head], minlength=size)
        assert np.allclose(counts / rows, p / p.sum(), atol=0.01), (head, counts)


def test_a_judge_without_recognition_errors_counts_what_each_record_holds(world: World) -> None:
    rng = np.random.default_rng(4)
    batch = training_batch(world, rng, 60, 4, 0.5, [0, 1, 2, 3], 15)
    o = simulate(world, batch, MLPPolicy(hidden=8, scenario_topics=world.scenario_topics), rng).observed
    r = read(o, JudgeFlaws(miss=0.0, false_recognition=0.0), salt=3)
    here = on_claim(o)
    shown, confessed = (o.sent & (o.reply == k) for k in (DISPLAY, CONFESSION))
    accused = o.sent & (o.pressure == ACCUSE)
    expected = {
        "turns": o.sent, "displays": shown, "displays_claim": shown & here, "confessions": confessed,
        "confessions_claim": confessed & here, "accusations": accused, "accusations_claim": accused & here,
        "pushes": o.sent & (o.pressure == PUSH), "tests": o.sent & (o.framing == TEST),
        "directs": o.sent & (o.framing == DIRECT), "remarks": o.sent & o.remark, "rollbacks": o.sent & o.rollback,
    }  # fmt: skip
    for name, flags in expected.items():
        assert np.array_equal(getattr(r, name), flags.sum(axis=1)), name
    assert np.array_equal(r.loops, repeats(o))
    assert r.displays.sum() > 0 and r.loops.sum() > 0 and r.accusations_claim.sum() > 0  # each count was exercised
