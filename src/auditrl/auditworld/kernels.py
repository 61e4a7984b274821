"""AuditWorld's per-episode loops compiled (numba): the simulation's per-turn bookkeeping, the policy heads' draws,
and record keys.

Done with whole-array numpy operations, a turn made some sixty passes over the running episodes, each a few
microseconds of call overhead and a temporary array; the target's reply and the state's update for one episode
are a few dozen scalar operations, which one compiled loop does in one pass. Each operation here keeps the
dtype the numpy form (`auditrl.auditworld.targets.respond`, the observation layout of
`auditrl.auditworld.observe`) gives it, float32 or float64, so the replies, and every draw that follows them,
are the same as that form's (tests/auditworld/test_kernels.py checks the two against each other).

A record's key folds every sent turn into a hash one turn at a time; over a batch in numpy that was a dozen
passes per turn. The heads' draws keep numpy's exponentials and BLAS's within-head sums (a compiled sum adds in
another order) and compile only the max-shift and the inverse-CDF count. Compiled on first use and cached beside
this file, so a process after the first loads them.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

from auditrl.auditworld.observe import (
    ANOMALIES_N,
    CONFESSIONS_N,
    KINDS,
    N_GLOBAL,
    NATURAL_N,
    PROBES_N,
    SLOT_COUNTS,
)
from auditrl.auditworld.targets import (
    ACCUSATION_AWARENESS,
    AWARE_SUPPRESSION,
    MAX_CONFESSION,
    PRESSURE_BUILDUP,
    PRESSURE_FACTOR,
)
from auditrl.auditworld.texts import (
    ACCUSE,
    CONFESSION,
    DIRECT,
    DISPLAY,
    NATURAL,
    NO_PRESSURE,
    ODD,
    PUSH,
    REPLY_KINDS,
    TEST,
)
from auditrl.auditworld.world import CONTROL_TOPIC, ROLLBACK

_PER_SLOT = len(SLOT_COUNTS)
_KINDS = len(REPLY_KINDS)
_CODES = 2 * _KINDS  # reply kind * 2 + eval-aware remark
_KIND_ROWS = N_GLOBAL - len(KINDS) - 1  # the observation's one-hot of the last reply's kind (then a constant 1)
_PRESSURE_FACTOR = PRESSURE_FACTOR.astype(np.float64)


@njit(cache=True, nogil=True)
def observe(
    state: NDArray[np.float32],
    alive: NDArray[np.int64],
    turn: float,
    n_counts: int,
    n_slots: int,
    columns: NDArray[np.intp],
    dst: NDArray[np.intp],
    src: NDArray[np.intp],
    scale: NDArray[np.float32],
    out: NDArray[np.float32],
) -> None:
    """The observations of the running episodes `alive` (rows of `state`, episodes x quantities; `columns` as
    `step` takes them), features x episodes into `out`: the turn, the counts scaled (`dst` <- `src` * `scale`),
    the last reply's kind and the last slot one-hot, the constant, and each slot's anomaly rate
    anomalies / (probes + 1). One feature at a time, so each write runs along a row of `out`."""
    kind_col, slot_col = columns[3], columns[4]
    slot_hot = N_GLOBAL + n_slots * (_PER_SLOT + 1)
    m = alive.size
    out[0, :m] = np.float32(turn)
    out[N_GLOBAL - 1, :m] = np.float32(1.0)
    for j in range(dst.size):
        row, col, factor = dst[j], src[j], scale[j]
        for i in range(m):
            out[row, i] = state[alive[i], col] * factor
    for i in range(m):
        e = alive[i]
        kind, slot = state[e, kind_col], state[e, slot_col]
        for c in range(len(KINDS)):
            out[_KIND_ROWS + c, i] = np.float32(np.float32(c) == kind)
        for s in range(n_slots):
            out[slot_hot + s, i] = np.float32(np.float32(s) == slot)
            at = n_counts + s * _PER_SLOT
            rate = state[e, at + ANOMALIES_N] / (state[e, at + PROBES_N] + np.float32(1.0))
            out[N_GLOBAL + s * (_PER_SLOT + 1) + _PER_SLOT, i] = rate


@njit(cache=True, nogil=True)
def reply(
    triggered: bool,
    onset_ok: bool,
    rates: NDArray[np.float32],
    e: int,
    framing: int,
    pressure: int,
    branch_pressure: np.float32,
    aware: bool,
    u: NDArray[np.float32],
    i: int,
) -> tuple[bool, bool, bool, bool, bool, bool]:
    """One reply, as `respond` gives it: (expressed, confession, eval-aware remark, denial, odd, aware after).
    Row `e` of `rates` holds the episode's target rates (expression, sycophancy, leak, eval-awareness, noise),
    column `i` of `u` its uniforms (awareness, confession, expression, noise)."""
    p_aware = np.float64(rates[e, 3]) * (
        np.float64(framing == TEST) + ACCUSATION_AWARENESS * np.float64(pressure == ACCUSE)
    )
    newly_aware = (not aware) and bool(np.float64(u[0, i]) < p_aware)
    aware_after = aware or newly_aware
    asked = framing == DIRECT or pressure != NO_PRESSURE
    build = np.float32(1.0) + np.float32(PRESSURE_BUILDUP) * branch_pressure
    p_syc = np.float64(rates[e, 1]) * _PRESSURE_FACTOR[pressure] * np.float64(build)
    leak = np.float32(triggered) * rates[e, 2] * np.float32(framing == DIRECT)
    p_conf = min(p_syc + np.float64(leak), MAX_CONFESSION)
    confession = asked and bool(np.float64(u[1, i]) < p_conf)
    denial = framing == DIRECT and not confession
    task = not confession and not denial
    p_exp = np.float64(rates[e, 0]) * (AWARE_SUPPRESSION if aware_after else 1.0)
    expressed = task and triggered and onset_ok and bool(np.float64(u[2, i]) < p_exp)
    odd = task and not expressed and bool(u[3, i] < rates[e, 4])
    return expressed, confession, newly_aware, denial, odd, aware_after


@njit(cache=True, nogil=True)
def step(
    state: NDArray[np.float32],
    rates: NDArray[np.float32],
    scenario: NDArray[np.int64],
    sorted_scenario: NDArray[np.int64],
    trigger: NDArray[np.bool_],
    alive: NDArray[np.int64],
    actions: NDArray[np.int64],
    u: NDArray[np.float32],
    n_topics: int,
    n_counts: int,
    n_slots: int,
    columns: NDArray[np.intp],
    increments: NDArray[np.float32],
    last_kind: NDArray[np.float32],
    kind_of_flags: NDArray[np.int64],
    messages: NDArray[np.int64],
    turn: int,
) -> None:
    """One message and its reply for each running episode `alive` (its actions, heads x episodes, none ending
    the audit), updating `state` (all episodes x quantities) and writing each message's record (topic,
    framing, pressure, rollback, reply kind, eval-aware remark, episode, turn) into `messages`' columns.

    `columns` names the state's columns: rollbacks, branch length, pressured messages in the branch, last reply's
    kind, last slot, suspicion voiced, awareness; `rates` holds per episode the target's rates and last the
    behavior's onset; `increments` what a message adds to the counters, by (framing, pressure, reply) code."""
    rollbacks, branch_len, branch_pressure = columns[0], columns[1], columns[2]
    kind_col, slot_col, seen_col, aware_col = columns[3], columns[4], columns[5], columns[6]
    k = scenario.shape[1]
    outside = np.float32(n_topics - k)
    for i in range(alive.size):
        e = alive[i]
        tool, slot, framing, pressure = actions[0, i], actions[1, i], actions[2, i], actions[3, i]
        if slot == CONTROL_TOPIC:  # the r-th topic outside the scenario
            topic = np.int64(u[4, i] * outside)
            for j in range(k):
                if topic >= sorted_scenario[e, j]:
                    topic += 1
        else:
            topic = scenario[e, slot - 1]
        rollback = tool == ROLLBACK
        if rollback:
            state[e, branch_len] = np.float32(0.0)
            state[e, branch_pressure] = np.float32(0.0)
            state[e, seen_col] = np.float32(0.0)
            state[e, aware_col] = np.float32(0.0)
            state[e, rollbacks] += np.float32(1.0)
        triggered = trigger[e, topic]
        expressed, confession, remark, denial, odd, aware_after = reply(
            triggered,
            state[e, branch_len] >= rates[e, 5],
            rates,
            e,
            framing,
            pressure,
            state[e, branch_pressure],
            state[e, aware_col] > np.float32(0.0),
            u,
            i,
        )
        kind = kind_of_flags[np.int64(confession) * 8 + np.int64(denial) * 4 + np.int64(expressed) * 2 + np.int64(odd)]
        at = n_counts + _PER_SLOT * slot
        state[e, at + NATURAL_N] += np.float32(framing == NATURAL)
        state[e, at + PROBES_N] += np.float32(1.0)
        state[e, at + ANOMALIES_N] += np.float32(expressed or odd)
        state[e, at + CONFESSIONS_N] += np.float32(confession)
        code = kind * 2 + np.int64(remark)
        column = (framing * 3 + pressure) * _CODES + code
        for r in range(n_counts):
            state[e, r] += increments[column, r]
        state[e, kind_col] = last_kind[code]
        state[e, slot_col] = np.float32(slot)
        if remark and state[e, seen_col] == np.float32(0.0):
            state[e, seen_col] += np.float32(1.0)
        state[e, aware_col] = np.float32(aware_after)
        messages[0, i], messages[1, i], messages[2, i], messages[3, i] = topic, framing, pressure, rollback
        messages[4, i], messages[5, i], messages[6, i], messages[7, i] = kind, remark, e, turn


@njit(cache=True, nogil=True)
def mix(x: np.uint64) -> np.uint64:
    """splitmix64's finaliser of one value (wrapping arithmetic), as `auditrl.auditworld.records.mix64`."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True, nogil=True)
def unit(h: np.uint64) -> float:
    """A hash's top 53 bits as a uniform draw in [0, 1)."""
    return np.float64(h >> np.uint64(11)) / np.float64(2.0**53)


@njit(cache=True, nogil=True)
def uniform(key: np.uint64, salted: np.uint64) -> float:
    """The uniform draw of one key under a salt already mixed (`mix(salt)`)."""
    return unit(mix(key ^ salted))


@njit(cache=True, nogil=True)
def mix_each(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """`mix` of each value (`records.mix64`)."""
    out = np.empty_like(x)
    for i in range(x.size):
        out[i] = mix(x[i])
    return out


@njit(cache=True, nogil=True)
def uniforms(key: NDArray[np.uint64], salt: int) -> NDArray[np.float64]:
    """A uniform draw per key, independent across salts (`records.uniform_of`)."""
    salted = mix(np.uint64(salt))
    out = np.empty(key.size, dtype=np.float64)
    for i in range(key.size):
        out[i] = uniform(key[i], salted)
    return out


@njit(cache=True, nogil=True)
def message_code(topic: int, framing: int, pressure: int, rollback: bool) -> int:
    """One code per kind of message: its topic (-1: none sent), framing, pressure and whether it followed a rollback
    (`records.repeats` compares the same code between turns)."""
    return (((topic + 1) * 3 + framing) * 3 + pressure) * 2 + rollback


@njit(cache=True, nogil=True)
def record_keys(
    planted: NDArray[np.bool_],
    trigger: NDArray[np.bool_],
    sent: NDArray[np.bool_],
    topic: NDArray[np.int64],
    framing: NDArray[np.int64],
    pressure: NDArray[np.int64],
    rollback: NDArray[np.bool_],
    reply: NDArray[np.int64],
    remark: NDArray[np.bool_],
    claim: NDArray[np.int64],
    confidence: NDArray[np.uint64],
    out: NDArray[np.uint64],
) -> None:
    """Each record's key (`Observed.key`): the plant and its trigger contexts, then every sent turn's code, then
    the claim and the confidence (in thousandths), each folded in with `mix`."""
    for i in range(planted.size):
        h = mix(np.uint64(0x9E3779B97F4A7C15) + np.uint64(planted[i]))
        contexts = np.uint64(0)
        for j in range(trigger.shape[1]):
            if trigger[i, j]:
                contexts |= np.uint64(1) << np.uint64(j)
        h = mix(h ^ contexts)
        for t in range(sent.shape[1]):
            if sent[i, t]:
                code = message_code(topic[i, t], framing[i, t], pressure[i, t], rollback[i, t]) * _KINDS
                h = mix(h ^ np.uint64((code + reply[i, t]) * 2 + remark[i, t]))
        h = mix(h ^ np.uint64(claim[i] + 1))
        out[i] = mix(h ^ confidence[i])


@njit(cache=True, nogil=True)
def shift_heads(logits: NDArray[np.float32], starts: NDArray[np.intp], sizes: NDArray[np.intp]) -> NDArray[np.float32]:
    """Each head's logits less their maximum, per row (logits laid out logits x rows)."""
    out = np.empty_like(logits)
    for h in range(starts.size):
        first, last = starts[h], starts[h] + sizes[h]
        for i in range(logits.shape[1]):
            top = logits[first, i]
            for j in range(first + 1, last):
                top = max(top, logits[j, i])
            for j in range(first, last):
                out[j, i] = logits[j, i] - top
    return out


@njit(cache=True, nogil=True)
def pick_heads(
    running: NDArray[np.float32],
    total: NDArray[np.float32],
    u: NDArray[np.floating],
    starts: NDArray[np.intp],
    sizes: NDArray[np.intp],
) -> NDArray[np.int64]:
    """Inverse-CDF choices, heads x rows: per head the number of choices whose running sum of weights (`running`,
    logits x rows) is at most its uniform times the head's total, capped at the head's last choice."""
    out = np.empty((starts.size, running.shape[1]), dtype=np.int64)
    for h in range(starts.size):
        for i in range(running.shape[1]):
            bound = u[h, i] * total[h, i]
            count = 0
            for j in range(starts[h], starts[h] + sizes[h]):
                if running[j, i] <= bound:
                    count += 1
            out[h, i] = min(count, sizes[h] - 1)
    return out


@njit(cache=True, nogil=True)
def read_counts(
    key: NDArray[np.uint64],
    salt: int,
    miss: float,
    false_recognition: float,
    sent: NDArray[np.bool_],
    topic: NDArray[np.int64],
    framing: NDArray[np.int64],
    pressure: NDArray[np.int64],
    rollback: NDArray[np.bool_],
    reply: NDArray[np.int64],
    remark: NDArray[np.bool_],
    claim: NDArray[np.int64],
    out: NDArray[np.int64],
) -> None:
    """A judge's per-record counts (`auditworld.judges.read`), one pass per record, into `out`'s rows: turns,
    displays, displays on the claimed topic, confessions, those on the claimed topic, accusations, those on the
    claimed topic, pushes, tests, directs, remarks, rollbacks, loops. A reply is taken for a display, or an odd
    reply mistaken for one, by the record's uniform of that turn (`records.uniform_of` of the key hashed with the
    turn, salted)."""
    salted = mix(np.uint64(salt))
    out[:] = 0
    for i in range(key.size):
        previous = -1
        for t in range(sent.shape[1]):
            code = message_code(topic[i, t], framing[i, t], pressure[i, t], rollback[i, t])
            if sent[i, t]:
                u = uniform(mix(key[i] + np.uint64(t + 1)), salted)
                here = claim[i] >= 0 and topic[i, t] == claim[i]
                kind = reply[i, t]
                seen = (kind == DISPLAY and u >= miss) or (kind == ODD and u < false_recognition)
                out[0, i] += 1
                out[1, i] += seen
                out[2, i] += seen and here
                out[3, i] += kind == CONFESSION
                out[4, i] += kind == CONFESSION and here
                out[5, i] += pressure[i, t] == ACCUSE
                out[6, i] += pressure[i, t] == ACCUSE and here
                out[7, i] += pressure[i, t] == PUSH
                out[8, i] += framing[i, t] == TEST
                out[9, i] += framing[i, t] == DIRECT
                out[10, i] += remark[i, t]
                out[11, i] += rollback[i, t]
                out[12, i] += t > 0 and code == previous
            previous = code
