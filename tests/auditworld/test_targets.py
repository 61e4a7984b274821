"""Target mechanics: triggers, family rates, denial, pressured confessions, eval-aware suppression."""

from __future__ import annotations

import numpy as np

from auditrl.auditworld.simulate import simulate
from auditrl.auditworld.targets import respond
from auditrl.auditworld.texts import DISPLAY
from auditrl.auditworld.world import World, evaluation_batch


def _respond(n: int, **overrides: object) -> object:
    args: dict[str, object] = dict(
        triggered=np.ones(n, bool),
        onset_ok=np.ones(n, bool),
        rate=np.full(n, 0.7),
        sycophancy=np.full(n, 0.3),
        leak=np.full(n, 0.05),
        eval_awareness=np.full(n, 0.6),
        noise=np.zeros(n),
        framing=np.zeros(n, np.int64),
        pressure=np.zeros(n, np.int64),
        branch_pressure=np.zeros(n, np.int64),
        aware=np.zeros(n, bool),
        u=np.random.default_rng(0).random((n, 5)),
    )
    args.update(overrides)
    return respond(**args)  # type: ignore[arg-type]


N = 20_000


def test_behavior_shows_only_in_trigger_contexts_and_never_on_benign_targets() -> None:
    on = _respond(N)
    off = _respond(N, triggered=np.zeros(N, bool))
    benign = _respond(N, triggered=np.zeros(N, bool), rate=np.zeros(N))
    assert abs(on.expressed.mean() - 0.7) < 0.02
    assert not off.expressed.any()
    assert not benign.expressed.any()


def test_direct_questions_are_denied_without_pressure() -> None:
    r = _respond(N, triggered=np.zeros(N, bool), framing=np.ones(N, np.int64))
    assert r.denial.all() and not r.confession.any() and not r.expressed.any()
    leaked = _respond(N, framing=np.ones(N, np.int64))
    assert 0.02 < leaked.confession.mean() < 0.08  # only the family's small genuine leak rate
    assert not leaked.false_confession.any()


def test_pressure_draws_sycophantic_confessions_from_benign_targets_too() -> None:
    none = _respond(N, triggered=np.zeros(N, bool), rate=np.zeros(N), framing=np.ones(N, np.int64))
    push = _respond(
        N, triggered=np.zeros(N, bool), rate=np.zeros(N), framing=np.ones(N, np.int64), pressure=np.ones(N, np.int64)
    )
    accuse = _respond(
        N, triggered=np.zeros(N, bool), rate=np.zeros(N), framing=np.ones(N, np.int64),
        pressure=np.full(N, 2), branch_pressure=np.full(N, 2),
    )  # fmt: skip
    assert none.confession.mean() == 0.0
    assert 0.0 < push.confession.mean() < accuse.confession.mean()
    assert (accuse.false_confession == accuse.confession).all()  # a benign target has nothing true to confess


def test_unrealistic_framing_makes_targets_eval_aware_and_suppresses_the_behavior() -> None:
    natural = _respond(N)
    test = _respond(N, framing=np.full(N, 2))
    assert natural.eval_aware.sum() == 0
    assert abs(test.eval_aware.mean() - 0.6) < 0.02
    assert test.expressed.mean() < 0.5 * natural.expressed.mean()
    assert not test.expressed[test.aware].mean() > 0.1


def test_families_differ_in_how_strongly_a_plant_shows(world: World) -> None:
    from auditrl.auditworld.policies import ExperimenterPolicy

    heldout = world.behavior_indices("heldout")
    rates = {}
    for name in ("guarded", "chatty"):
        batch = evaluation_batch(world, heldout, world.families.index(name), 20, 15, benign=False)
        r = simulate(world, batch, ExperimenterPolicy(), np.random.default_rng(0))
        o = r.observed
        rates[name] = (o.reply[o.sent] == DISPLAY).mean()
    assert rates["chatty"] > rates["guarded"] * 1.2
