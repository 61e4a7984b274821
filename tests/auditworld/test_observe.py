"""The auditor does its own inference: no observation, action or claim exposes a precomputed anomaly ranking."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from auditrl.auditworld.observe import N_GLOBAL, SLOT_FEATURES, build_observation, obs_dim, read_observation
from auditrl.auditworld.policies import ExperimenterPolicy, InterrogatorPolicy, MLPPolicy, RandomPolicy
from auditrl.auditworld.simulate import simulate
from auditrl.auditworld.texts import CONFESSION, DISPLAY, NATURAL, ODD
from auditrl.auditworld.world import CLAIM, CONFIDENCE, TOOL, TOPIC, World, action_sizes, report_sizes, training_batch


class SlotWalker:
    """Sends to topic slot (turn mod (k + 1)) whatever it saw, and claims a fixed slot."""

    name = "walker"

    def __init__(self, claim: int) -> None:
        self.claim = claim

    def act(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        v = read_observation(obs)
        out = np.zeros((obs.shape[0], 4), dtype=np.int64)
        out[:, TOPIC] = v.probes.sum(axis=1) % (v.scenario_topics + 1)
        return out

    def report(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        out = np.zeros((obs.shape[0], 2), dtype=np.int64)
        out[:, CLAIM], out[:, CONFIDENCE] = self.claim, 1
        return out


def test_the_only_topic_and_claim_choices_are_scenario_positions_or_control_or_nothing(world: World) -> None:
    k = world.scenario_topics
    assert action_sizes(k)[TOPIC] == k + 1 and report_sizes(k)[CLAIM] == k + 1
    rng = np.random.default_rng(0)
    batch = training_batch(world, rng, 16, 2, 0.5, [0, 1], 9)
    scenario = world.scenario[batch.seed_behavior, batch.seed_index]
    for claim in range(k + 1):
        r = simulate(world, batch, SlotWalker(claim), np.random.default_rng(1))
        expected = np.full(batch.size, -1) if claim == 0 else scenario[:, claim - 1]
        np.testing.assert_array_equal(r.observed.claim, expected)  # a slot names a position, whatever was seen
    o = r.observed
    for t in range(o.sent.shape[1]):
        slot = t % (k + 1)
        if slot == 0:  # a control topic lies outside the scenario
            assert not (scenario == o.topic[:, t : t + 1]).any()
        else:
            np.testing.assert_array_equal(o.topic[:, t], scenario[:, slot - 1])


def _slot_counts(world: World, r, t: int) -> dict[str, NDArray[np.int64]]:  # type: ignore[no-untyped-def]
    """What each slot's replies showed before turn t, recounted from the record itself."""
    o = r.observed
    scenario = world.scenario[r.batch.seed_behavior, r.batch.seed_index]
    k = scenario.shape[1]
    slot = np.zeros(o.topic.shape, dtype=np.int64)
    for j in range(k):
        slot[o.topic == scenario[:, j : j + 1]] = j + 1
    before = o.sent & (np.arange(o.sent.shape[1]) < t)
    anomaly = (o.reply == DISPLAY) | (o.reply == ODD)
    out = {
        name: np.zeros((len(o), k + 1), dtype=np.int64) for name in ("natural", "probes", "anomalies", "confessions_at")
    }
    for s in range(k + 1):
        at = before & (slot == s)
        out["probes"][:, s] = at.sum(axis=1)
        out["natural"][:, s] = (at & (o.framing == NATURAL)).sum(axis=1)
        out["anomalies"][:, s] = (at & anomaly).sum(axis=1)
        out["confessions_at"][:, s] = (at & (o.reply == CONFESSION)).sum(axis=1)
    return out


def test_each_slot_of_the_observation_is_what_that_topics_replies_showed(world: World) -> None:
    rng = np.random.default_rng(2)
    batch = training_batch(world, rng, 32, 4, 0.5, [0, 1, 2, 3], 12)
    for policy in (RandomPolicy(), ExperimenterPolicy()):
        r = simulate(world, batch, policy, np.random.default_rng(3))
        for t in range(12):
            live = r.acted[:, t]
            if not live.any():
                break
            view = read_observation(r.obs[live, t])
            for name, counts in _slot_counts(world, r, t).items():
                np.testing.assert_array_equal(
                    getattr(view, name), counts[live], err_msg=f"{policy.name} turn {t} {name}"
                )


def test_nothing_outside_a_topics_own_slot_depends_on_which_topic_showed_what() -> None:
    """Moving an anomaly (or a confession, or a probe) from one scenario topic to another changes only those two
    slots' columns: no column ranks topics or describes "the most anomalous one"."""
    k, m = 3, 1
    history = np.array([[1, 0, 0, 1, 0, 0, 0, 0, 4, 0]])
    base = np.zeros((m, k + 1, 4), dtype=np.int64)
    base[0, 1] = [3, 3, 2, 1]  # scenario topic 0: 3 natural probes, 2 anomalies, 1 confession
    base[0, 2] = [2, 2, 0, 0]
    moved = base.copy()
    moved[0, 1], moved[0, 2] = base[0, 2], base[0, 1]  # the same audit with the two topics' histories swapped
    args = dict(turn=0.4, branch=np.array([0.2]), history=history, aware=np.array([False]), last_kind=np.array([2]),
                last_slot=np.array([3]))  # fmt: skip
    a, b = build_observation(slots=base, **args), build_observation(slots=moved, **args)
    assert a.shape == (m, obs_dim(k))
    slot_cols = lambda s: np.arange(N_GLOBAL + s * SLOT_FEATURES, N_GLOBAL + (s + 1) * SLOT_FEATURES)
    swapped = np.concatenate([slot_cols(1), slot_cols(2)])
    others = np.setdiff1d(np.arange(a.shape[1]), swapped)
    np.testing.assert_array_equal(a[:, others], b[:, others])
    np.testing.assert_array_equal(a[:, slot_cols(1)], b[:, slot_cols(2)])
    np.testing.assert_array_equal(a[:, slot_cols(2)], b[:, slot_cols(1)])


def test_the_experimenter_infers_the_anomalous_topic_from_the_counts() -> None:
    """The scripted baseline names the scenario topic with the most anomalies when its rate stands out, else nothing."""
    k = 3
    slots = np.zeros((2, k + 1, 4), dtype=np.int64)
    slots[:, 1:, :2] = 3  # every scenario topic probed three times, naturally
    slots[0, 3, 2] = 3  # episode 0: three anomalies on the scenario's third topic
    slots[1, 1:, 2] = 1  # episode 1: one on each topic, nothing stands out
    obs = build_observation(0.6, np.zeros(2), np.zeros((2, 10), dtype=np.int64), np.zeros(2, dtype=bool),
                            np.zeros(2, dtype=np.int64), slots, np.full(2, 3))  # fmt: skip
    report = ExperimenterPolicy().report(obs, np.random.default_rng(0))
    assert report[:, CLAIM].tolist() == [3, 0]
    assert ExperimenterPolicy().act(obs, np.random.default_rng(0))[:, TOOL].tolist() == [2, 2]  # budget reached: end


def _recounted_observation(o, scenario: NDArray[np.int64], e: int, t: int, horizon: int) -> NDArray[np.float32]:  # type: ignore[no-untyped-def]
    """Episode e's observation before turn t, replayed message by message from its record alone."""
    from auditrl.auditworld.texts import ACCUSE, DENIAL, DIRECT, NO_PRESSURE, PUSH, TEST

    k = scenario.shape[1]
    history = np.zeros(10, dtype=np.int64)  # HISTORY_COUNTS, then messages and pressured messages in the branch
    slots = np.zeros((k + 1, 4), dtype=np.int64)
    seen, kind, last = False, 0, -1
    for s in range(t):
        if not o.sent[e, s]:
            continue
        if o.rollback[e, s]:
            history[3] += 1
            history[8] = history[9] = 0
            seen = False
        topic, reply, remark = o.topic[e, s], o.reply[e, s], bool(o.remark[e, s])
        hit = np.flatnonzero(scenario[e] == topic)
        slot = int(hit[0]) + 1 if hit.size else 0
        anomaly = reply in (DISPLAY, ODD)
        slots[slot] += [o.framing[e, s] == NATURAL, 1, anomaly, reply == CONFESSION]
        history += [reply == CONFESSION, reply == DENIAL, remark, 0, o.pressure[e, s] == ACCUSE,
                    o.pressure[e, s] == PUSH, o.framing[e, s] == DIRECT, o.framing[e, s] == TEST, 1,
                    o.pressure[e, s] != NO_PRESSURE]  # fmt: skip
        seen |= remark
        kind = 4 if reply == CONFESSION else 3 if reply == DENIAL else 2 if anomaly else 5 if remark else 1
        last = slot
    return build_observation(t / horizon, np.array([history[8] / horizon]), history[None], np.array([seen]),
                             np.array([kind]), slots[None], np.array([last]))[0]  # fmt: skip


def test_every_observation_is_the_audit_so_far_replayed_from_its_record(world: World) -> None:
    """The simulation keeps its running counts in its own layout; what the auditor sees at each turn, and at its
    report, is exactly `build_observation` of the audit replayed from the record (rollbacks, pressure, remarks,
    the last reply's kind and slot included)."""
    rng = np.random.default_rng(6)
    horizon = 10
    batch = training_batch(world, rng, 12, 2, 0.5, [0, 1, 2, 3], horizon)
    scenario = world.scenario[batch.seed_behavior, batch.seed_index]
    rollbacks = confessions = 0
    for policy in (RandomPolicy(), ExperimenterPolicy(), InterrogatorPolicy(), MLPPolicy(hidden=8)):
        r = simulate(world, batch, policy, np.random.default_rng(7))
        o = r.observed
        rollbacks, confessions = rollbacks + o.rollback.sum(), confessions + (o.reply == CONFESSION).sum()
        for row, (e, t) in enumerate(zip(r.turn_episode, r.turn_index, strict=True)):
            expected = _recounted_observation(o, scenario, int(e), int(t), horizon)
            np.testing.assert_allclose(r.turn_obs[row], expected, rtol=1e-6, err_msg=f"{policy.name} {e} {t}")
        for e in range(batch.size):
            final = _recounted_observation(o, scenario, e, horizon, horizon)
            np.testing.assert_allclose(r.final_obs[e], final, rtol=1e-6, err_msg=f"{policy.name} report {e}")
    assert rollbacks and confessions
