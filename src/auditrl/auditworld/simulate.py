"""Stepping a batch of AuditWorld episodes together in numpy, one auditor action per turn.

The auditor sees what each topic slot's replies showed so far (`auditrl.auditworld.observe`); the target
answers through `auditrl.auditworld.targets`; the episode's record (`Observed`) and its ground truth
(`Features`) are `auditrl.auditworld.records`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from auditrl.auditworld import kernels
from auditrl.auditworld.observe import (
    COUNT_SCALE,
    N_GLOBAL,
    SLOT_COUNTS,
    SLOT_FEATURES,
    obs_dim,
)
from auditrl.auditworld.policies import Activations, MLPPolicy, sample_heads
from auditrl.auditworld.records import Features, Observed, ground_truth
from auditrl.auditworld.targets import N_UNIFORMS
from auditrl.auditworld.texts import (
    ACCUSE,
    CONFESSION,
    DENIAL,
    DIRECT,
    DISPLAY,
    NO_PRESSURE,
    ODD,
    PUSH,
    REPLY_KINDS,
    TEST,
)
from auditrl.auditworld.world import (
    CLAIM,
    CONFIDENCE,
    CONFIDENCES,
    END,
    NO_CLAIM,
    TOOL,
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
    activations: Activations | None = None  # an MLP policy's forward pass over these turns and reports

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


# The episodes' state, one row per episode and one column per quantity, in float32 (counts stay exact): the
# counters (the observation's HISTORY_COUNTS: confessions, denials, remarks, rollbacks, accusations, pushes, directs,
# tests; then messages in the current branch and pressured messages in it), each topic slot's SLOT_COUNTS, and last
# the kind of the last reply, the slot of the last message (-1: none yet), whether the target voiced suspicion in the
# current branch, and whether it is aware.
_ROLLBACKS, _BRANCH_LEN, _BRANCH_PRESSURE = 3, 8, 9
_N_COUNTS = 10


def _state_columns(slots: int) -> tuple[int, int, int, int, int]:
    """State columns of the last reply's kind, the last slot, suspicion voiced, awareness; and the number of
    columns."""
    kind = _N_COUNTS + slots * len(SLOT_COUNTS)
    return kind, kind + 1, kind + 2, kind + 3, kind + 4


def _increments() -> NDArray[np.float32]:
    """(codes, counters): what one message and its reply add to the counters, by code
    ((framing * 3 + pressure) * 5 + reply kind) * 2 + eval-aware remark."""
    inc = np.zeros((9 * len(REPLY_KINDS) * 2, _N_COUNTS), dtype=np.float32)
    for framing in range(3):
        for pressure in range(3):
            for reply in range(len(REPLY_KINDS)):
                for remark in range(2):
                    col = inc[((framing * 3 + pressure) * len(REPLY_KINDS) + reply) * 2 + remark]
                    col[0], col[1], col[2] = reply == CONFESSION, reply == DENIAL, remark
                    col[4], col[5] = pressure == ACCUSE, pressure == PUSH
                    col[6], col[7] = framing == DIRECT, framing == TEST
                    col[_BRANCH_LEN], col[_BRANCH_PRESSURE] = 1, pressure != NO_PRESSURE
    return inc


def _last_kinds() -> NDArray[np.float32]:
    """The observation's last-reply kind by reply kind * 2 + eval-aware remark: a confession, a denial, an
    anomaly (display or odd), else an eval remark, else a normal reply."""
    kind = {0: 1, DISPLAY: 2, ODD: 2, DENIAL: 3, CONFESSION: 4}
    return np.array(
        [5 if remark and reply == 0 else kind[reply] for reply in range(len(REPLY_KINDS)) for remark in range(2)],
        dtype=np.float32,
    )


_INCREMENTS, _LAST_KIND = _increments(), _last_kinds()
_REPLY_KIND_OF_FLAGS = np.array([0, ODD, DISPLAY, DISPLAY, DENIAL, DENIAL, DENIAL, DENIAL] + [CONFESSION] * 8)
"""Reply kind by confession * 8 + denial * 4 + expressed * 2 + odd (a confession wins, then a denial)."""


@functools.cache
def _observation_map(slots: int, horizon: int) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.float32]]:
    """Observation rows that are a state column times a scale (`build_observation`'s layout): the rows, their
    state columns, and the scales."""
    kind, _, seen, _, _ = _state_columns(slots)
    dst = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    src = [_BRANCH_LEN, 0, 1, 2, seen, 3, 4, 5, 6, 7]
    scale = [1.0 / horizon] + [1.0 / COUNT_SCALE] * 3 + [1.0] + [1.0 / COUNT_SCALE] * 5
    for j in range(slots):
        for c in range(len(SLOT_COUNTS)):
            dst.append(N_GLOBAL + j * SLOT_FEATURES + c)
            src.append(_N_COUNTS + j * len(SLOT_COUNTS) + c)
            scale.append(1.0 / COUNT_SCALE)
    return np.array(dst), np.array(src), np.array(scale, dtype=np.float32)


class _Lane:
    """One policy's share of a joint rollout: its episodes (columns `start` to `stop` of the joint batch), its own
    generator, and its acted turns in turn order (features x turns buffers, with an MLP's forward pass)."""

    def __init__(self, policy: Policy, rng: np.random.Generator, start: int, stop: int, horizon: int, dim: int):
        self.policy, self.rng, self.start, self.stop = policy, rng, start, stop
        cap = (stop - start) * horizon
        self.obs = np.empty((dim, cap), dtype=np.float32)
        self.actions = np.empty((4, cap), dtype=np.int64)
        self.episode = np.empty(cap, dtype=np.int64)
        self.mlp = policy if isinstance(policy, MLPPolicy) else None
        if self.mlp is not None:
            hid = self.mlp.weight_views()[0].shape[0]
            self.h1, self.h2 = np.empty((hid, cap), dtype=np.float32), np.empty((hid, cap), dtype=np.float32)
            self.logits = np.empty((self.mlp.n_action_logits, cap), dtype=np.float32)
        self.per_turn: list[int] = []
        self.off = 0

    def act(self, obs: NDArray[np.float32], episodes: NDArray[np.int64]) -> NDArray[np.int64]:
        """Choose this turn's actions for the lane's running episodes (observations features x rows; episode
        indices in the joint batch), recording them; returns the actions, heads x rows."""
        c = episodes.size
        cols = slice(self.off, self.off + c)
        self.obs[:, cols] = obs
        self.episode[cols] = episodes - self.start
        if self.mlp is not None:
            self.mlp.forward_into(self.obs[:, cols], self.h1[:, cols], self.h2[:, cols], self.logits[:, cols], False)
            u = self.rng.random((len(self.mlp.action_sizes), c), dtype=np.float32)
            self.actions[:, cols] = sample_heads(self.logits[:, cols], self.mlp.action_sizes, u)
        else:
            self.actions[:, cols] = self.policy.act(obs.T, self.rng).T
        self.per_turn.append(c)
        self.off += c
        return self.actions[:, cols]

    def report(self, final_obs: NDArray[np.float32]) -> tuple[NDArray[np.int64], Activations | None]:
        """The lane's reports (episodes x (claim slot, confidence)) from its final observations (features x
        episodes), and an MLP's forward pass over its turns and reports."""
        if self.mlp is None:
            return self.policy.report(final_obs.T, self.rng), None
        h1_report, h2_report, logits_report = self.mlp.forward_numpy(final_obs, report=True)
        u = self.rng.random((len(self.mlp.report_sizes), final_obs.shape[1]), dtype=np.float32)
        report = sample_heads(logits_report, self.mlp.report_sizes, u).T
        activations = Activations(
            weights=[w.copy() for w in self.mlp.weight_views()],
            h1=self.h1[:, : self.off], h2=self.h2[:, : self.off], logits=self.logits[:, : self.off],
            h1_report=h1_report, h2_report=h2_report, logits_report=logits_report,
        )  # fmt: skip
        return report, activations


def simulate(world: World, batch: EpisodeBatch, policy: Policy, rng: np.random.Generator) -> Rollout:
    """Run every episode of the batch to its end (policy ends it, or the turn budget runs out)."""
    return simulate_many(world, [batch], [policy], [rng])[0]


def _joined(batches: Sequence[EpisodeBatch]) -> EpisodeBatch:
    if len(batches) == 1:
        return batches[0]
    cat = lambda name: np.concatenate([getattr(b, name) for b in batches])
    return EpisodeBatch(cat("behavior"), cat("seed_behavior"), cat("seed_index"), cat("family"), batches[0].max_turns)


def simulate_many(
    world: World, batches: Sequence[EpisodeBatch], policies: Sequence[Policy], rngs: Sequence[np.random.Generator]
) -> list[Rollout]:
    """Run several policies' batches (one turn budget) together, one rollout each, every episode to its end.

    Each turn computes only the episodes still running, so the cost follows the turns actually taken; each
    turn's work on them (observing, the target's replies, the bookkeeping: `auditrl.auditworld.kernels`) is done
    once for every policy's episodes; only choosing actions is done per policy (`_Lane`). Each policy draws from
    its own generator in the order it would alone, so its rollout is the same as simulating its batch by itself.
    An MLP policy's forward pass is kept (`Rollout.activations`) for the update.
    """
    horizons = {b.max_turns for b in batches}
    if len(horizons) != 1 or not len(batches) == len(policies) == len(rngs):
        raise ValueError(
            f"simulate_many needs one batch, policy and generator per lane and one turn budget, "
            f"got {len(batches)}, {len(policies)}, {len(rngs)} and budgets {sorted(horizons)}"
        )
    batch = _joined(batches)
    n, horizon, n_t = batch.size, batch.max_turns, world.n_topics
    planted = batch.planted
    beh = np.where(planted, batch.behavior, 0)
    fam = batch.family
    bt, ft = world.behaviors, world.families
    scenario_all = world.scenario[batch.seed_behavior, batch.seed_index]
    k = scenario_all.shape[1]
    n_slots = k + 1
    trig_all = bt.trigger[beh] & planted[:, None]
    kind_col, slot_col, seen_col, aware_col, n_cols = _state_columns(n_slots)
    columns = np.array([_ROLLBACKS, _BRANCH_LEN, _BRANCH_PRESSURE, kind_col, slot_col, seen_col, aware_col])
    dst, src, scale = _observation_map(n_slots, horizon)
    scenario = np.ascontiguousarray(scenario_all, dtype=np.int64)
    sorted_scenario = np.sort(scenario, axis=1)
    # The target's rates and the behavior's onset, one row per episode.
    rates = np.column_stack(
        [
            np.where(planted, bt.rate[beh] * ft.susceptibility[fam], 0.0),
            ft.sycophancy[fam],
            ft.leak[fam],
            ft.eval_awareness[fam],
            ft.noise[fam],
            bt.onset[beh],
        ]
    ).astype(np.float32)
    state = np.zeros((n, n_cols), dtype=np.float32)
    state[:, slot_col] = -1.0
    alive = np.arange(n)  # the running episodes, in order
    starts = np.cumsum([0, *(b.size for b in batches)])
    text_u = [r.random((b.size, horizon)) for b, r in zip(batches, rngs, strict=True)]
    cap, dim = n * horizon, obs_dim(k)
    lanes = [
        _Lane(p, r, int(a), int(b), horizon, dim)
        for p, r, a, b in zip(policies, rngs, starts[:-1], starts[1:], strict=True)
    ]
    msg_buf = np.empty((8, cap), dtype=np.int64)  # per message: topic, framing, pressure, rollback, reply, remark,
    final_obs = np.empty((dim, n), dtype=np.float32)  # episode, turn
    obs_scratch = np.empty((dim, n), dtype=np.float32)
    moff = 0
    for t in range(horizon):
        m = alive.size
        if m == 0:
            break
        obs = obs_scratch[:, :m]
        kernels.observe(state, alive, t / horizon, _N_COUNTS, n_slots, columns, dst, src, scale, obs)
        if len(lanes) == 1:  # one run (train, evaluation): no split, no copies, on the hot path
            actions = lanes[0].act(obs, alive)
        else:
            actions = np.empty((4, m), dtype=np.int64)
            bounds = np.searchsorted(alive, starts).tolist()
            for lane, a, b in zip(lanes, bounds[:-1], bounds[1:], strict=True):
                if b > a:
                    actions[:, a:b] = lane.act(obs[:, a:b], alive[a:b])
        send = actions[TOOL] != END
        if not send.all():
            leaving = ~send
            gone = alive[leaving]
            final_obs[:, gone] = obs[:, leaving]
            final_obs[0, gone] = 1.0
            keep = np.flatnonzero(send)
            alive, actions = alive[keep], actions.take(keep, axis=1)
            m = keep.size
            if m == 0:
                break
        if len(lanes) == 1:
            u = lanes[0].rng.random((N_UNIFORMS, m), dtype=np.float32)
        else:
            bounds = np.searchsorted(alive, starts).tolist()
            u = np.concatenate(
                [
                    lane.rng.random((N_UNIFORMS, b - a), dtype=np.float32)
                    for lane, a, b in zip(lanes, bounds[:-1], bounds[1:], strict=True)
                ],
                axis=1,
            )
        kernels.step(
            state, rates, scenario, sorted_scenario, trig_all, alive, actions, u, n_t, _N_COUNTS, n_slots, columns,
            _INCREMENTS, _LAST_KIND, _REPLY_KIND_OF_FLAGS, msg_buf[:, moff : moff + m], t,
        )  # fmt: skip
        moff += m

    if alive.size:
        last = np.empty((dim, alive.size), dtype=np.float32)
        kernels.observe(state, alive, 1.0, _N_COUNTS, n_slots, columns, dst, src, scale, last)
        final_obs[:, alive] = last
    msg = msg_buf[:, :moff]
    at = msg[6] * horizon + msg[7]

    def log(dtype: type, fill: int, values: NDArray[np.int64] | None) -> NDArray:
        out: NDArray = np.full((n, horizon), fill, dtype=dtype)
        out.ravel()[at] = 1 if values is None else values
        return out

    record = {
        "planted": planted, "trigger": trig_all, "sent": log(bool, 0, None), "rollback": log(bool, 0, msg[3]),
        "topic": log(np.int64, -1, msg[0]), "framing": log(np.int64, 0, msg[1]), "pressure": log(np.int64, 0, msg[2]),
        "reply": log(np.int64, 0, msg[4]), "remark": log(bool, 0, msg[5]),
    }  # fmt: skip
    rollouts = []
    for lane, b, u_text in zip(lanes, batches, text_u, strict=True):
        part = slice(lane.start, lane.stop)
        lane_final = final_obs[:, part]
        report, activations = lane.report(lane_final)
        claim_slot, conf_idx = report[:, CLAIM], report[:, CONFIDENCE]
        scenario = scenario_all[part]
        claim_topic = np.where(claim_slot == NO_CLAIM, -1, scenario[np.arange(b.size), np.maximum(claim_slot - 1, 0)])
        observed = Observed(
            **{name: values[part] for name, values in record.items()},
            claim=claim_topic,
            confidence=np.where(claim_topic >= 0, np.asarray(CONFIDENCES)[conf_idx], 0.0),
        )
        rollouts.append(
            Rollout(
                batch=b,
                observed=observed,
                text_u=u_text,
                turn_episode=lane.episode[: lane.off],
                turn_index=np.repeat(np.arange(len(lane.per_turn)), lane.per_turn),
                turn_obs=lane.obs[:, : lane.off].T,
                turn_actions=lane.actions[:, : lane.off].T,
                final_obs=lane_final.T,
                report=report,
                activations=activations,
            )
        )
    return rollouts
