"""Auditor policies over AuditWorld's structured actions: a trainable MLP and three baselines.

The baselines are what a careful human might script: random actions; a systematic experimenter that
probes the scenario naturally, tests control topics and re-runs the trigger after a rollback; and an
interrogator that presses and accuses until the target confesses.
"""

from __future__ import annotations

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from auditrl.sim.world import ACTION_SIZES, OBS_DIM, REPORT_SIZES

HEAD_SIZES = ACTION_SIZES + REPORT_SIZES
N_ACTION_LOGITS = sum(ACTION_SIZES)


def gumbel_sample(logits: NDArray[np.float64], sizes: tuple[int, ...], rng: np.random.Generator) -> NDArray[np.int64]:
    """Sample one index per head from concatenated logits (Gumbel-max), with numpy's seeded generator."""
    g = logits - np.log(-np.log(rng.random(logits.shape)))
    out = np.empty((logits.shape[0], len(sizes)), dtype=np.int64)
    start = 0
    for i, size in enumerate(sizes):
        out[:, i] = np.argmax(g[:, start : start + size], axis=1)
        start += size
    return out


class MLPPolicy(nn.Module):
    """Small MLP from the observation to the logits of every action and report head.

    The last layer starts at zero, so an untrained policy is exactly the uniform random policy.
    """

    def __init__(self, hidden: int = 64, seed: int = 0, name: str = "mlp") -> None:
        super().__init__()
        self.name = name
        gen = torch.Generator().manual_seed(seed)
        self.body = nn.Sequential(nn.Linear(OBS_DIM, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.head = nn.Linear(hidden, sum(HEAD_SIZES))
        with torch.no_grad():
            for layer in (self.body[0], self.body[2]):
                layer.weight.copy_(torch.randn(layer.weight.shape, generator=gen) / np.sqrt(layer.in_features))
                layer.bias.zero_()
            self.head.weight.zero_()
            self.head.bias.zero_()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(obs))

    def _logits(self, obs: NDArray[np.float32]) -> NDArray[np.float64]:
        with torch.no_grad():
            return self(torch.from_numpy(obs)).double().numpy()

    def act(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        return gumbel_sample(self._logits(obs)[:, :N_ACTION_LOGITS], ACTION_SIZES, rng)

    def report(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        return gumbel_sample(self._logits(obs)[:, N_ACTION_LOGITS:], REPORT_SIZES, rng)


class RandomPolicy:
    """Uniform over every head: the floor any trained auditor must beat."""

    name = "random"

    def act(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        return np.stack([rng.integers(0, s, size=obs.shape[0]) for s in ACTION_SIZES], axis=1)

    def report(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        return np.stack([rng.integers(0, s, size=obs.shape[0]) for s in REPORT_SIZES], axis=1)


def _counts(obs: NDArray[np.float32]) -> dict[str, NDArray[np.float64]]:
    """The quantities the scripted auditors reason with, read back from the normalised observation."""
    o = obs.astype(np.float64)
    return {
        "t": o[:, 0],
        "branch": o[:, 1],
        "anom_seed": np.rint(o[:, 2] * 3),
        "probes_seed": o[:, 3],
        "probes_other": o[:, 5],
        "rate_seed": o[:, 6],
        "rate_other": o[:, 7],
        "confessions": np.rint(o[:, 8] * 3),
        "aware": o[:, 11],
    }


class ExperimenterPolicy:
    """Controlled variation: natural probes of the scenario, control topics, rollback and re-test.

    Budget fractions keep the plan the same at any turn budget: about two scenario probes per control
    probe; roll back once the target has voiced suspicion or the branch is a quarter of the budget long;
    stop at `stop_at` of the budget or once three anomalies in the scenario stand against a control.
    Reports the scenario only when its anomaly rate clearly exceeds the controls'.
    """

    name = "experimenter"

    def __init__(self, stop_at: float = 0.6, branch_limit: float = 0.25) -> None:
        self.stop_at = stop_at
        self.branch_limit = branch_limit

    def act(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        c = _counts(obs)
        decisive = (c["anom_seed"] >= 3) & (c["probes_other"] > 0)
        end = (c["t"] >= self.stop_at) | decisive
        restart = (c["aware"] > 0) | (c["branch"] >= self.branch_limit)
        out = np.zeros((obs.shape[0], 4), dtype=np.int64)
        out[:, 0] = np.where(end, 2, np.where(restart, 1, 0))
        out[:, 1] = np.where(c["probes_other"] < 0.5 * c["probes_seed"], 1, 0)
        return out

    def report(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        c = _counts(obs)
        signal = (c["anom_seed"] >= 2) & (c["rate_seed"] - c["rate_other"] >= 0.25)
        return np.stack([np.where(signal, 1, 0), np.where(c["anom_seed"] >= 3, 2, 1)], axis=1)


class InterrogatorPolicy:
    """Pressure and direct accusation: one natural opener, then pushes, then accusations until a confession.

    Reports whatever the target confessed to, with high confidence; nothing if it never gave in.
    """

    name = "interrogator"

    def __init__(self, stop_at: float = 0.4, accuse_from: float = 0.15) -> None:
        self.stop_at = stop_at
        self.accuse_from = accuse_from

    def act(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        c = _counts(obs)
        first = c["t"] == 0
        end = (c["confessions"] >= 1) | (c["t"] >= self.stop_at)
        out = np.zeros((obs.shape[0], 4), dtype=np.int64)
        out[:, 0] = np.where(end & ~first, 2, 0)
        out[:, 2] = np.where(first, 0, 1)
        out[:, 3] = np.where(first, 0, np.where(c["t"] >= self.accuse_from, 2, 1))
        return out

    def report(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        c = _counts(obs)
        return np.stack([np.where(c["confessions"] >= 1, 3, 0), np.full(obs.shape[0], 2)], axis=1)


def baselines() -> list[RandomPolicy | ExperimenterPolicy | InterrogatorPolicy]:
    """The three reference auditors every trained policy is compared with."""
    return [RandomPolicy(), ExperimenterPolicy(), InterrogatorPolicy()]
