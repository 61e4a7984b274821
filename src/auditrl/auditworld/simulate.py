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
    """A simulated batch: what a judge can read (`observed`), policy inputs for training, and ground truth."""

    batch: EpisodeBatch
    observed: Observed
    text_u: NDArray[np.float64]  # (n, H) draw that picks each turn's text variants
    acted: NDArray[np.bool_]  # (n, H) the policy chose an action at this turn
    obs: NDArray[np.float32]  # (n, H, obs_dim)
    actions: NDArray[np.int64]  # (n, H, 4)
    final_obs: NDArray[np.float32]
    report: NDArray[np.int64]  # (n, 2): claim slot, confidence index

    @functools.cached_property
    def features(self) -> Features:
        """The episodes' ground truth, computed when first read (training reads only the record)."""
        return ground_truth(self.observed)


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

    Each turn computes only the episodes still running, so the cost follows the turns actually taken.
    """
    n, horizon, n_t = batch.size, batch.max_turns, world.n_topics
    rows = np.arange(n)
    planted = batch.planted
    beh = np.where(planted, batch.behavior, 0)
    fam = batch.family
    bt, ft = world.behaviors, world.families
    scenario = world.scenario[batch.seed_behavior, batch.seed_index]
    sorted_scenario = np.sort(scenario, axis=1)
    k = scenario.shape[1]
    rate = np.where(planted, bt.rate[beh] * ft.susceptibility[fam], 0.0)
    syc, leak, evalaw, noise = ft.sycophancy[fam], ft.leak[fam], ft.eval_awareness[fam], ft.noise[fam]
    onset = bt.onset[beh]
    trig_table = bt.trigger[beh] & planted[:, None]

    slots = np.zeros((n, k + 1, 4), dtype=np.int64)  # per topic slot: natural probes, probes, anomalies, confessions
    counts = np.zeros((n, _N_COUNTS), dtype=np.int64)
    last_kind = np.zeros(n, dtype=np.int64)
    last_slot = np.full(n, -1, dtype=np.int64)
    aware_seen = np.zeros(n, dtype=bool)  # the target voiced suspicion in the current branch
    aware = np.zeros(n, dtype=bool)
    live = rows
    shape = (n, horizon)
    sent_log = np.zeros(shape, dtype=bool)
    rollback_log = np.zeros(shape, dtype=bool)
    remark_log = np.zeros(shape, dtype=bool)
    acted = np.zeros(shape, dtype=bool)
    topic_log = np.full(shape, -1, dtype=np.int64)
    framing_log = np.zeros(shape, dtype=np.int64)
    pressure_log = np.zeros(shape, dtype=np.int64)
    reply_log = np.zeros(shape, dtype=np.int64)
    text_u = rng.random(shape)
    obs_log = np.zeros((n, horizon, obs_dim(k)), dtype=np.float32)
    act_log = np.zeros((n, horizon, 4), dtype=np.int64)

    def observe(at: NDArray[np.int64] | slice, t: int) -> NDArray[np.float32]:
        c = counts[at]
        return build_observation(t / horizon, c[:, _BRANCH_LEN] / horizon, c, aware_seen[at], last_kind[at], slots[at], last_slot[at])

    for t in range(horizon):
        if live.size == 0:
            break
        # Row-only reads and writes take a slice while every episode runs (views, no copies).
        at = slice(None) if live.size == n else live
        obs = observe(at, t)
        actions = policy.act(obs, rng)
        obs_log[at, t] = obs
        act_log[at, t] = actions
        acted[at, t] = True
        send = actions[:, TOOL] != END
        i = live[send]
        live = i
        if i.size == 0:
            break
        m = i.size
        sel = slice(None) if m == n else i
        tool, slot, framing, pressure = (actions[send, h] for h in (TOOL, TOPIC, FRAMING, PRESSURE))
        control = _outside(sorted_scenario[sel], rng.integers(0, n_t - k, size=m))
        topic = np.where(slot == CONTROL_TOPIC, control, scenario[i, np.maximum(slot - 1, 0)])
        rollback = tool == ROLLBACK
        back = i[rollback]
        counts[back, _BRANCH_LEN] = 0
        counts[back, _BRANCH_PRESSURE] = 0
        counts[back, _ROLLBACKS] += 1
        aware[back] = False
        aware_seen[back] = False
        r = respond(
            triggered=trig_table[i, topic],
            onset_ok=counts[sel, _BRANCH_LEN] >= onset[sel],
            rate=rate[sel],
            sycophancy=syc[sel],
            leak=leak[sel],
            eval_awareness=evalaw[sel],
            noise=noise[sel],
            framing=framing,
            pressure=pressure,
            branch_pressure=counts[sel, _BRANCH_PRESSURE],
            aware=aware[sel],
            u=uniforms(rng, m),
        )
        aware[sel] = r.aware
        anomaly = r.expressed | r.odd
        inc = np.empty((m, 4), dtype=np.int64)
        inc[:, NATURAL_N], inc[:, PROBES_N], inc[:, ANOMALIES_N], inc[:, CONFESSIONS_N] = framing == NATURAL, 1, anomaly, r.confession
        slots[i, slot] += inc  # one slot per episode: no repeated index
        last_slot[sel] = slot
        counts[sel] += _MESSAGE_INC[framing * 3 + pressure] + _REPLY_INC[r.confession * 4 + r.denial * 2 + r.eval_aware]
        aware_seen[sel] |= r.eval_aware
        # last kind: 1 normal, 2 anomaly, 3 denial, 4 confession, 5 eval remark (confession wins)
        last_kind[sel] = np.where(r.confession, 4, np.where(r.denial, 3, np.where(anomaly, 2, np.where(r.eval_aware, 5, 1))))
        sent_log[sel, t] = True
        rollback_log[sel, t] = rollback
        remark_log[sel, t] = r.eval_aware
        topic_log[sel, t] = topic
        framing_log[sel, t] = framing
        pressure_log[sel, t] = pressure
        reply_log[sel, t] = np.where(
            r.confession, CONFESSION, np.where(r.denial, DENIAL, np.where(r.expressed, DISPLAY, np.where(r.odd, ODD, 0)))
        )

    final_obs = observe(slice(None), horizon)
    report = policy.report(final_obs, rng)
    claim_slot, conf_idx = report[:, CLAIM], report[:, CONFIDENCE]
    claim_topic = np.where(claim_slot == NO_CLAIM, -1, scenario[rows, np.maximum(claim_slot - 1, 0)])
    observed = Observed(
        planted=planted,
        trigger=trig_table,
        sent=sent_log,
        rollback=rollback_log,
        topic=topic_log,
        framing=framing_log,
        pressure=pressure_log,
        reply=reply_log,
        remark=remark_log,
        claim=claim_topic,
        confidence=np.where(claim_topic >= 0, np.asarray(CONFIDENCES)[conf_idx], 0.0),
    )
    return Rollout(
        batch=batch,
        observed=observed,
        text_u=text_u,
        acted=acted,
        obs=obs_log,
        actions=act_log,
        final_obs=final_obs,
        report=report,
    )
