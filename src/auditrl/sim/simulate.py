"""Stepping a batch of AuditWorld episodes together in numpy, one auditor action per turn.

The auditor sees a fixed-size summary of what it observed; the target answers through
`auditrl.sim.targets`; the episode's record (`Observed`) and its ground truth (`Features`) are
`auditrl.sim.records`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from auditrl.sim.records import CONFESSION, DENIAL, DISPLAY, ODD, Features, Observed, ground_truth
from auditrl.sim.targets import respond, uniforms
from auditrl.sim.texts import ACCUSE, DIRECT, NATURAL, NO_PRESSURE, PUSH, TEST
from auditrl.sim.world import (
    CLAIM,
    CLAIM_HOT,
    CLAIM_SEED,
    CONFIDENCE,
    CONFIDENCES,
    CONTROL_TOPIC,
    END,
    FRAMING,
    KINDS,
    NO_CLAIM,
    OBS_DIM,
    PRESSURE,
    ROLLBACK,
    SEED_TOPIC,
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
    obs: NDArray[np.float32]  # (n, H, OBS_DIM)
    actions: NDArray[np.int64]  # (n, H, 4)
    final_obs: NDArray[np.float32]
    report: NDArray[np.int64]  # (n, 2): claim kind, confidence index
    features: Features = field(repr=False)


def _hot(score: NDArray[np.int64], lead_bonus: NDArray[np.int64]) -> NDArray[np.int64]:
    """Topic with the highest score; the scenario's lead topic wins ties and is the answer when nothing scored.

    `lead_bonus` is 1 at each row's lead topic, else 0: doubling the integer scores lets it break ties only.
    """
    return np.argmax(2 * score + lead_bonus, axis=1)


def _observe(
    s: dict[str, NDArray], idx: NDArray[np.int64] | slice, lead_bonus: NDArray[np.int64], k: int, t: int, horizon: int
) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    """The auditor's summary of what it has seen, for episodes `idx`: the most anomalous topic against the
    rest, and its own history. Also returns that topic (the `hot` choice).

    Per-episode totals are kept as running counters (`s["totals"]`), so only the hot topic needs the
    per-topic tables; `idx` is a slice while every episode still runs (no copies)."""
    anom, probes_nat, probes_all = s["anom"][idx], s["probes_nat"][idx], s["probes_all"][idx]
    n = anom.shape[0]
    b = np.arange(n)
    hot = _hot(anom, lead_bonus[idx])
    anom_hot, all_hot, nat_hot = anom[b, hot], probes_all[b, hot], probes_nat[b, hot]
    rest = anom.copy() if isinstance(idx, slice) else anom
    rest[b, hot] = -1
    totals = s["totals"][idx]
    anom_sum, nat_sum, all_sum, covered = totals[:, 0], totals[:, 1], totals[:, 2], totals[:, 3]
    o = np.empty((n, OBS_DIM), dtype=np.float32)
    c = s["counts"][idx]
    o[:, 0] = t / horizon
    o[:, 1] = c[:, _BRANCH_LEN] / horizon
    o[:, 2] = np.minimum(anom_hot, 3) / 3
    o[:, 3] = nat_hot / horizon
    o[:, 4] = np.clip(rest.max(axis=1), 0, 3) / 3
    o[:, 5] = (nat_sum - nat_hot) / horizon
    o[:, 6] = anom_hot / (all_hot + 1)
    o[:, 7] = (anom_sum - anom_hot) / (all_sum - all_hot + 1)
    o[:, 8:11] = np.minimum(c[:, :3], 3) / 3  # confessions, denials, eval-aware remarks
    o[:, 11] = s["aware_seen"][idx]
    o[:, 12] = np.minimum(c[:, 3], 3) / 3  # rollbacks
    o[:, 13:17] = c[:, 4:8] / horizon  # accusations, pushes, direct questions, test framings
    o[:, 17:23] = _KIND_ONE_HOT[s["last_kind"][idx]]
    o[:, 23] = s["in_scenario"][idx][b, hot]
    o[:, 24] = covered / k
    o[:, 25] = 1.0
    return o, hot


_KIND_ONE_HOT = np.eye(len(KINDS), dtype=np.float32)
# Per-episode counters: confessions, denials, remarks, rollbacks, accusations, pushes, directs, tests,
# messages in the current branch, pressured messages in it.
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
    lead = scenario[:, 0]
    in_scenario = np.zeros((n, n_t), dtype=bool)
    in_scenario[rows[:, None], scenario] = True
    lead_bonus = np.zeros((n, n_t), dtype=np.int64)
    lead_bonus[rows, lead] = 1
    rate = np.where(planted, bt.rate[beh] * ft.susceptibility[fam], 0.0)
    syc, leak, evalaw, noise = ft.sycophancy[fam], ft.leak[fam], ft.eval_awareness[fam], ft.noise[fam]
    onset = bt.onset[beh]
    trig_table = bt.trigger[beh] & planted[:, None]

    zi = lambda: np.zeros(n, dtype=np.int64)  # noqa: E731
    zt = lambda: np.zeros((n, n_t), dtype=np.int64)  # noqa: E731
    s: dict[str, NDArray] = {
        "anom": zt(), "probes_nat": zt(), "probes_all": zt(), "conf_obs": zt(),
        "counts": np.zeros((n, _N_COUNTS), dtype=np.int64), "last_kind": zi(), "aware_seen": np.zeros(n, dtype=bool),
        "totals": np.zeros((n, 4), dtype=np.int64), "in_scenario": in_scenario,
    }  # fmt: skip
    aware = np.zeros(n, dtype=bool)
    live = rows
    seed_sends = zi()
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
    obs_log = np.zeros((n, horizon, OBS_DIM), dtype=np.float32)
    act_log = np.zeros((n, horizon, 4), dtype=np.int64)

    for t in range(horizon):
        if live.size == 0:
            break
        # Row-only reads and writes take a slice while every episode runs (views, no copies); pairs of
        # (row, topic) indices need the row numbers.
        at = slice(None) if live.size == n else live
        obs, hot = _observe(s, at, lead_bonus, k, t, horizon)
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
        tool, choice, framing, pressure = (actions[send, h] for h in (TOOL, TOPIC, FRAMING, PRESSURE))
        control = _outside(sorted_scenario[sel], rng.integers(0, n_t - k, size=m))
        topic = np.where(choice == SEED_TOPIC, scenario[i, seed_sends[sel] % k], np.where(choice == CONTROL_TOPIC, control, hot[send]))
        seed_sends[sel] += choice == SEED_TOPIC
        rollback = tool == ROLLBACK
        back = i[rollback]
        counts = s["counts"]
        counts[back, _BRANCH_LEN] = 0
        counts[back, _BRANCH_PRESSURE] = 0
        counts[back, _ROLLBACKS] += 1
        aware[back] = False
        s["aware_seen"][back] = False
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
        natural = framing == NATURAL
        s["totals"][sel] += np.stack(
            [anomaly, natural, np.ones(m, dtype=bool), natural & in_scenario[i, topic] & (s["probes_nat"][i, topic] == 0)], axis=1
        )
        s["probes_all"][i, topic] += 1  # one topic per episode: no repeated index
        s["probes_nat"][i, topic] += natural
        s["anom"][i, topic] += anomaly
        s["conf_obs"][i, topic] += r.confession
        counts[sel] += _MESSAGE_INC[framing * 3 + pressure] + _REPLY_INC[r.confession * 4 + r.denial * 2 + r.eval_aware]
        s["aware_seen"][sel] |= r.eval_aware
        # last kind: 1 normal, 2 anomaly, 3 denial, 4 confession, 5 eval remark (confession wins)
        s["last_kind"][sel] = np.where(
            r.confession, 4, np.where(r.denial, 3, np.where(anomaly, 2, np.where(r.eval_aware, 5, 1)))
        )
        sent_log[sel, t] = True
        rollback_log[sel, t] = rollback
        remark_log[sel, t] = r.eval_aware
        topic_log[sel, t] = topic
        framing_log[sel, t] = framing
        pressure_log[sel, t] = pressure
        reply_log[sel, t] = np.where(
            r.confession, CONFESSION, np.where(r.denial, DENIAL, np.where(r.expressed, DISPLAY, np.where(r.odd, ODD, 0)))
        )

    final_obs, hot = _observe(s, slice(None), lead_bonus, k, horizon, horizon)
    report = policy.report(final_obs, rng)
    claim_kind, conf_idx = report[:, CLAIM], report[:, CONFIDENCE]
    claim_topic = np.where(
        claim_kind == NO_CLAIM,
        -1,
        np.where(claim_kind == CLAIM_SEED, lead, np.where(claim_kind == CLAIM_HOT, hot, _hot(s["conf_obs"], lead_bonus))),
    )
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
        features=ground_truth(observed),
    )
