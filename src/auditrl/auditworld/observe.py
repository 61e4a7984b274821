"""What an AuditWorld auditor sees: per scenario topic, what that topic's replies showed so far.

The auditor refers to topics by slot: slot 0 is "a control topic" (any topic outside the scenario, a
fresh one each time), slot j + 1 is the scenario's j-th topic. For each slot the observation holds
counts of what the auditor did there and what the target's replies showed (natural probes, all probes,
anomalies, confessions, and the anomaly rate), besides the auditor's own history (turn clock, branch
length, rollbacks, pressure used) and the kind of the last reply. Nothing in it ranks the topics: which
topic is most anomalous, and whether that is evidence, is the auditor's own inference, for the trained
policy and the scripted baselines alike (they read the same vector through `read_observation`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

KINDS = ("none", "normal", "anomaly", "denial", "confession", "eval_remark")
"""What the auditor saw in the last reply."""
COUNT_SCALE = 3.0
"""Counts enter the observation divided by this (exact: a policy can read them back as integers)."""
SLOT_COUNTS = ("natural", "probes", "anomalies", "confessions")
"""The per-slot counters the simulation keeps, in this order."""
NATURAL_N, PROBES_N, ANOMALIES_N, CONFESSIONS_N = range(len(SLOT_COUNTS))
SLOT_FEATURES = len(SLOT_COUNTS) + 1  # the counts and the anomaly rate anomalies / (probes + 1)
HISTORY = (
    "turn",
    "branch",
    "confessions",
    "denials",
    "remarks",
    "aware",
    "rollbacks",
    "accusations",
    "pushes",
    "directs",
    "tests",
)
"""Global columns: budget fractions (turn, branch), the audit's own counts, and whether the target voiced
suspicion in the current branch."""
N_GLOBAL = len(HISTORY) + len(KINDS) + 1  # ... the last reply's kind (one-hot), and a constant 1
HISTORY_COUNTS = ("confessions", "denials", "remarks", "rollbacks", "accusations", "pushes", "directs", "tests")
"""The columns of `build_observation`'s `history` argument."""


def n_slots(scenario_topics: int) -> int:
    return scenario_topics + 1


def obs_dim(scenario_topics: int) -> int:
    """Global columns, per-slot features, and the slot of the last message (one-hot; zeros before the first)."""
    s = n_slots(scenario_topics)
    return N_GLOBAL + s * SLOT_FEATURES + s


def scenario_topics_of(dim: int) -> int:
    """The scenario size an observation of width `dim` was built for."""
    s, rest = divmod(dim - N_GLOBAL, SLOT_FEATURES + 1)
    if rest or s < 2:
        raise ValueError(f"an observation of width {dim} matches no scenario size")
    return s - 1


_KIND_ONE_HOT = np.eye(len(KINDS), dtype=np.float32)


def build_observation(
    turn: float,
    branch: NDArray[np.float64],
    history: NDArray[np.int64],
    aware: NDArray[np.bool_],
    last_kind: NDArray[np.int64],
    slots: NDArray[np.int64],
    last_slot: NDArray[np.int64],
) -> NDArray[np.float32]:
    """The observation of m episodes.

    `turn` and `branch` are budget fractions; `history` (m, 8 or more) holds the audit's counts in
    HISTORY_COUNTS order; `slots` (m, k + 1, 4) the per-slot counts (SLOT_COUNTS); `last_slot` the slot
    of the last message (-1 = none yet).
    """
    m, s = slots.shape[0], slots.shape[1]
    # Filled feature by feature into a (features, m) block, so each write is one contiguous row; returned as
    # its (m, features) transpose.
    t = np.empty((N_GLOBAL + s * SLOT_FEATURES + s, m), dtype=np.float32)
    t[0] = turn
    t[1] = branch
    h = history[:, :8].T
    np.divide(h[:3], COUNT_SCALE, out=t[2:5], casting="unsafe")
    t[5] = aware
    np.divide(h[3:8], COUNT_SCALE, out=t[6:11], casting="unsafe")
    t[11:17] = _KIND_ONE_HOT[:, last_kind]
    t[17] = 1.0
    block = t[N_GLOBAL : N_GLOBAL + s * SLOT_FEATURES].reshape(s, SLOT_FEATURES, m)
    per_slot = slots.transpose(1, 2, 0)  # (s, counts, m)
    np.multiply(per_slot, np.float32(1.0 / COUNT_SCALE), out=block[:, :4], casting="unsafe")
    np.divide(per_slot[:, ANOMALIES_N], per_slot[:, PROBES_N] + 1, out=block[:, 4], casting="unsafe")
    t[N_GLOBAL + s * SLOT_FEATURES :] = _slot_one_hot(s)[:, last_slot + 1]
    return t.T


@functools.cache
def _slot_one_hot(slots: int) -> NDArray[np.float32]:
    """(slots, slots + 1): column 0 no message yet (zeros); column j + 1: slot j."""
    return np.eye(slots, slots + 1, 1, dtype=np.float32)


@dataclass(frozen=True)
class ObservationView:
    """An observation read back into counts, for scripted auditors (slot 0 = control, j + 1 = scenario topic j)."""

    turn: NDArray[np.float64]
    branch: NDArray[np.float64]
    confessions: NDArray[np.int64]
    aware: NDArray[np.bool_]
    natural: NDArray[np.int64]  # (n, k + 1)
    probes: NDArray[np.int64]
    anomalies: NDArray[np.int64]
    confessions_at: NDArray[np.int64]

    @property
    def scenario_topics(self) -> int:
        return int(self.natural.shape[1] - 1)


def read_observation(obs: NDArray[np.float32]) -> ObservationView:
    """The counts behind an observation (exact: every count was stored as count / COUNT_SCALE)."""
    k = scenario_topics_of(obs.shape[1])
    s = n_slots(k)
    o = obs.astype(np.float64)
    block = o[:, N_GLOBAL : N_GLOBAL + s * SLOT_FEATURES].reshape(-1, s, SLOT_FEATURES)
    counts = np.rint(block[:, :, :4] * COUNT_SCALE).astype(np.int64)
    return ObservationView(
        turn=o[:, 0],
        branch=o[:, 1],
        confessions=np.rint(o[:, 2] * COUNT_SCALE).astype(np.int64),
        aware=o[:, 5] > 0.5,
        natural=counts[:, :, NATURAL_N],
        probes=counts[:, :, PROBES_N],
        anomalies=counts[:, :, ANOMALIES_N],
        confessions_at=counts[:, :, CONFESSIONS_N],
    )
