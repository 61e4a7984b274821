"""Stepping a batch of AuditWorld episodes together in numpy, one auditor action per turn.

The auditor sees what each topic slot's replies showed so far (`auditrl.auditworld.observe`); the target
answers through `auditrl.auditworld.targets`; the episode's record (`Observed`) and its ground truth
(`Features`) are `auditrl.auditworld.records`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from auditrl.auditworld.observe import ANOMALIES_N, CONFESSIONS_N, NATURAL_N, PROBES_N, build_observation, obs_dim
from auditrl.auditworld.records import CONFESSION, DENIAL, DISPLAY, ODD, Features, Observed, ground_truth
from auditrl.auditworld.targets import respond, uniforms
from auditrl.auditworld.texts import ACCUSE, DIRECT, NATURAL, NO_PRESSURE, PUSH, TEST
from auditrl.auditworld.world import (
    CLAIM,
    CONFIDENCE,
    CONFIDENCES,
    CONTROL_TOPIC,
    END,
    FRAMING,
    NO_CLAIM,
    PRESSURE,
    ROLLBACK,
    TOOL,
    TOPIC,
    EpisodeBatch,
    Policy,
    World,
)


@dataclass
class Rollout:
    """A simulated batch: what a judge can read (`observed`), policy inputs for training, and ground truth.

    The policy's inputs and choices are kept per acted turn, turn by turn (`turn_episode`, `turn_index`,
    `turn_obs`, `turn_actions`: one row per turn at which the policy chose an action), which is the layout
    training reads; `obs` and `actions` lay the same rows out per (episode, turn).
    """

    batch: EpisodeBatch
    observed: Observed
    text_u: NDArray[np.float64]  # (n, H) draw that picks each turn's text variants
    turn_episode: NDArray[np.int64]  # (acted turns,) the episode of each acted turn
    turn_index: NDArray[np.int64]  # (acted turns,) its turn
    turn_obs: NDArray[np.float32]  # (acted turns, obs_dim)
    turn_actions: NDArray[np.int64]  # (acted turns, 4)
    final_obs: NDArray[np.float32]
    report: NDArray[np.int64]  # (n, 2): claim slot, confidence index

    @functools.cached_property
    def features(self) -> Features:
        """The episodes' ground truth, computed when first read (training reads only the record)."""
        return ground_truth(self.observed)

    @functools.cached_property
    def acted(self) -> NDArray[np.bool_]:
        """(n, H): the policy chose an action at this turn."""
        out = np.zeros(self.text_u.shape, dtype=bool)
        out[self.turn_episode, self.turn_index] = True
        return out

    @functools.cached_property
    def obs(self) -> NDArray[np.float32]:
        """(n, H, obs_dim): the observation at each acted turn (zeros elsewhere)."""
        out = np.zeros((*self.text_u.shape, self.turn_obs.shape[1]), dtype=np.float32)
        out[self.turn_episode, self.turn_index] = self.turn_obs
        return out

    @functools.cached_property
    def actions(self) -> NDArray[np.int64]:
        """(n, H, 4): the action at each acted turn (zeros elsewhere)."""
        out = np.zeros((*self.text_u.shape, self.turn_actions.shape[1]), dtype=np.int64)
        out[self.turn_episode, self.turn_index] = self.turn_actions
        return out


# Per-episode counters: confessions, denials, remarks, rollbacks, accusations, pushes, directs, tests
# (the observation's HISTORY_COUNTS), messages in the current branch, pressured messages in it.
_ROLLBACKS, _BRANCH_LEN, _BRANCH_PRESSURE = 3, 8, 9
_N_COUNTS = 10


def _message_increments() -> NDArray[np.int64]:
    """Counter increments of one message, indexed by framing * 3 + pressure."""
    inc = np.zeros((9, _N_COUNTS), dtype=np.int64)
    for framing in range(3):
        for pressure in range(3):
            row = inc[framing * 3 + pressure]
            row[4], row[5] = pressure == ACCUSE, pressure == PUSH
            row[6], row[7] = framing == DIRECT, framing == TEST
            row[_BRANCH_LEN], row[_BRANCH_PRESSURE] = 1, pressure != NO_PRESSURE
    return inc


def _reply_increments() -> NDArray[np.int64]:
    """Counter increments of one reply, indexed by confession * 4 + denial * 2 + eval-aware remark."""
    inc = np.zeros((8, _N_COUNTS), dtype=np.int64)
    for code in range(8):
        inc[code, 0], inc[code, 1], inc[code, 2] = code >> 2 & 1, code >> 1 & 1, code & 1
    return inc


_MESSAGE_INC, _REPLY_INC = _message_increments(), _reply_increments()


def _outside(sorted_scenario: NDArray[np.int64], r: NDArray[np.int64]) -> NDArray[np.int64]:
    """The r-th topic (0-based) among those not in each row's scenario (scenario topics sorted per row)."""
    out = r.copy()
    for col in sorted_scenario.T:
        out += out >= col
    return out


def simulate(world: World, batch: EpisodeBatch, policy: Policy, rng: np.random.Generator) -> Rollout:
    """Run every episode of the batch to its end (policy ends it, or the turn budget runs out).

    Each turn computes only the episodes still running, so the cost follows the turns actually taken: the
    running episodes' state is kept compacted (rows in `live` order), so each turn's work reads and writes
    whole arrays; an episode's final observation is taken when it leaves.
    """
    n, horizon, n_t = batch.size, batch.max_turns, world.n_topics
    rows = np.arange(n)
    planted = batch.planted
    beh = np.where(planted, batch.behavior, 0)
    fam = batch.family
    bt, ft = world.behaviors, world.families
    scenario_all = world.scenario[batch.seed_behavior, batch.seed_index]
    k = scenario_all.shape[1]
    trig_all = bt.trigger[beh] & planted[:, None]
    # Per running episode (compacted as episodes end): the plant, the family, the scenario, and the counters.
    trig, scenario = trig_all, scenario_all
    sorted_scenario = np.sort(scenario, axis=1)
    rate = np.where(planted, bt.rate[beh] * ft.susceptibility[fam], 0.0)
    syc, leak, evalaw, noise = ft.sycophancy[fam], ft.leak[fam], ft.eval_awareness[fam], ft.noise[fam]
    onset = bt.onset[beh]
    slots = np.zeros((n, k + 1, 4), dtype=np.int64)  # per topic slot: natural probes, probes, anomalies, confessions
    counts = np.zeros((n, _N_COUNTS), dtype=np.int64)
    last_kind = np.zeros(n, dtype=np.int64)
    last_slot = np.full(n, -1, dtype=np.int64)
    aware_seen = np.zeros(n, dtype=bool)  # the target voiced suspicion in the current branch
    aware = np.zeros(n, dtype=bool)
    live = rows
    # Turn-major logs (turn, episode): each turn writes one contiguous row.
    shape = (horizon, n)
    sent_log = np.zeros(shape, dtype=bool)
    rollback_log = np.zeros(shape, dtype=bool)
    remark_log = np.zeros(shape, dtype=bool)
    topic_log = np.full(shape, -1, dtype=np.int64)
    framing_log = np.zeros(shape, dtype=np.int64)
    pressure_log = np.zeros(shape, dtype=np.int64)
    reply_log = np.zeros(shape, dtype=np.int64)
    text_u = rng.random((n, horizon))
    final_obs = np.empty((n, obs_dim(k)), dtype=np.float32)
    acted_rows: list[NDArray[np.int64]] = []
    acted_obs: list[NDArray[np.float32]] = []
    acted_actions: list[NDArray[np.int64]] = []

    def observe(t: int) -> NDArray[np.float32]:
        return build_observation(
            t / horizon, counts[:, _BRANCH_LEN] / horizon, counts, aware_seen, last_kind, slots, last_slot
        )

    for t in range(horizon):
        if live.size == 0:
            break
        obs = observe(t)
        actions = policy.act(obs, rng)
        acted_rows.append(live)
        acted_obs.append(obs)
        acted_actions.append(actions)
        send = actions[:, TOOL] != END
        if not send.all():
            leaving = ~send
            final_obs[live[leaving]] = build_observation(
                1.0, counts[leaving, _BRANCH_LEN] / horizon, counts[leaving], aware_seen[leaving], last_kind[leaving],
                slots[leaving], last_slot[leaving],
            )  # fmt: skip
            live, actions = live[send], actions[send]
            trig, scenario, sorted_scenario = trig[send], scenario[send], sorted_scenario[send]
            rate, syc, leak, evalaw, noise, onset = (
                rate[send],
                syc[send],
                leak[send],
                evalaw[send],
                noise[send],
                onset[send],
            )
            slots, counts, last_kind, last_slot = slots[send], counts[send], last_kind[send], last_slot[send]
            aware_seen, aware = aware_seen[send], aware[send]
            if live.size == 0:
                break
        m = live.size
        m_rows = np.arange(m)
        tool, slot, framing, pressure = (actions[:, h] for h in (TOOL, TOPIC, FRAMING, PRESSURE))
        control = _outside(sorted_scenario, rng.integers(0, n_t - k, size=m))
        topic = np.where(slot == CONTROL_TOPIC, control, scenario[m_rows, np.maximum(slot - 1, 0)])
        rollback = tool == ROLLBACK
        if rollback.any():
            counts[rollback, _BRANCH_LEN] = 0
            counts[rollback, _BRANCH_PRESSURE] = 0
            counts[rollback, _ROLLBACKS] += 1
            aware[rollback] = False
            aware_seen[rollback] = False
        r = respond(
            triggered=trig[m_rows, topic],
            onset_ok=counts[:, _BRANCH_LEN] >= onset,
            rate=rate,
            sycophancy=syc,
            leak=leak,
            eval_awareness=evalaw,
            noise=noise,
            framing=framing,
            pressure=pressure,
            branch_pressure=counts[:, _BRANCH_PRESSURE],
            aware=aware,
            u=uniforms(rng, m),
        )
        aware = r.aware
        anomaly = r.expressed | r.odd
        at_slot = slots[m_rows, slot]  # one slot per episode: no repeated index
        at_slot[:, NATURAL_N] += framing == NATURAL
        at_slot[:, PROBES_N] += 1
        at_slot[:, ANOMALIES_N] += anomaly
        at_slot[:, CONFESSIONS_N] += r.confession
        slots[m_rows, slot] = at_slot
        last_slot = slot
        counts += _MESSAGE_INC[framing * 3 + pressure] + _REPLY_INC[r.confession * 4 + r.denial * 2 + r.eval_aware]
        aware_seen |= r.eval_aware
        # last kind: 1 normal, 2 anomaly, 3 denial, 4 confession, 5 eval remark (confession wins)
        last_kind = np.where(r.confession, 4, np.where(r.denial, 3, np.where(anomaly, 2, np.where(r.eval_aware, 5, 1))))
        sent_log[t, live] = True
        rollback_log[t, live] = rollback
        remark_log[t, live] = r.eval_aware
        topic_log[t, live] = topic
        framing_log[t, live] = framing
        pressure_log[t, live] = pressure
        reply_log[t, live] = np.where(
            r.confession,
            CONFESSION,
            np.where(r.denial, DENIAL, np.where(r.expressed, DISPLAY, np.where(r.odd, ODD, 0))),
        )

    if live.size:
        final_obs[live] = observe(horizon)
    report = policy.report(final_obs, rng)
    claim_slot, conf_idx = report[:, CLAIM], report[:, CONFIDENCE]
    claim_topic = np.where(claim_slot == NO_CLAIM, -1, scenario_all[rows, np.maximum(claim_slot - 1, 0)])
    observed = Observed(
        planted=planted,
        trigger=trig_all,
        sent=np.ascontiguousarray(sent_log.T),
        rollback=np.ascontiguousarray(rollback_log.T),
        topic=np.ascontiguousarray(topic_log.T),
        framing=np.ascontiguousarray(framing_log.T),
        pressure=np.ascontiguousarray(pressure_log.T),
        reply=np.ascontiguousarray(reply_log.T),
        remark=np.ascontiguousarray(remark_log.T),
        claim=claim_topic,
        confidence=np.where(claim_topic >= 0, np.asarray(CONFIDENCES)[conf_idx], 0.0),
    )
    return Rollout(
        batch=batch,
        observed=observed,
        text_u=text_u,
        turn_episode=np.concatenate(acted_rows) if acted_rows else np.zeros(0, dtype=np.int64),
        turn_index=np.repeat(np.arange(len(acted_rows)), [r.size for r in acted_rows]),
        turn_obs=np.concatenate(acted_obs) if acted_obs else np.zeros((0, obs_dim(k)), dtype=np.float32),
        turn_actions=np.concatenate(acted_actions) if acted_actions else np.zeros((0, 4), dtype=np.int64),
        final_obs=final_obs,
        report=report,
    )
