"""Auditor policies over AuditWorld's structured actions: a trainable MLP and four baselines.

The baselines are what a careful human might script: random actions; a systematic experimenter that
probes the scenario's topics naturally, tests control topics and re-runs the most anomalous topic after
a rollback; an interrogator that presses and accuses until the target confesses; and a blind auditor
that follows a fixed plan and reports without looking at anything the target said (any metric it passes
measures the world, not the auditor).
"""

from __future__ import annotations

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from auditrl.sim.texts import ACCUSE, DIRECT, NATURAL, NO_PRESSURE, PUSH
from auditrl.sim.world import (
    ACTION_SIZES,
    CLAIM_CONFESSED,
    CLAIM_HOT,
    CLAIM_SEED,
    CONTROL_TOPIC,
    END,
    FRAMING,
    HOT_TOPIC,
    NO_CLAIM,
    OBS_DIM,
    PRESSURE,
    REPORT_SIZES,
    ROLLBACK,
    SEED_TOPIC,
    SEND,
    TOOL,
    TOPIC,
)

HEAD_SIZES = ACTION_SIZES + REPORT_SIZES
N_ACTION_LOGITS = sum(ACTION_SIZES)


def gumbel_sample(logits: NDArray[np.float64], sizes: tuple[int, ...], rng: np.random.Generator) -> NDArray[np.int64]:
    """Sample one index per head from concatenated logits (Gumbel-max), with numpy's seeded generator."""
    g = logits - np.log(-np.log(rng.random(logits.shape)))
    if len(set(sizes)) == 1:
        return np.argmax(g.reshape(g.shape[0], len(sizes), sizes[0]), axis=2)
    out = np.empty((logits.shape[0], len(sizes)), dtype=np.int64)
    start = 0
    for i, size in enumerate(sizes):
        out[:, i] = np.argmax(g[:, start : start + size], axis=1)
        start += size
    return out


class MLPPolicy(nn.Module):
    """Small MLP from the observation to the logits of every action and report head.

    The last layer's weights start at zero, so an untrained policy ignores its observations: uniform
    over every action head and over the confidence, and reporting no finding with probability
    `prior_no_finding` (the rest spread evenly over the claims). That prior stands in for an
    instruction-tuned base model, which mostly does not accuse a model without evidence; its size is an
    assumption (the paper's base Haiku scored 98.9 on false-positive calibration).
    """

    def __init__(self, hidden: int = 64, seed: int = 0, name: str = "mlp", prior_no_finding: float = 0.25) -> None:
        super().__init__()
        if not 0.0 <= prior_no_finding < 1.0:
            raise ValueError(f"prior_no_finding must be in [0, 1), got {prior_no_finding}")
        self.name = name
        gen = torch.Generator().manual_seed(seed)
        self.body = nn.Sequential(nn.Linear(OBS_DIM, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, sum(HEAD_SIZES))
        n_claims = REPORT_SIZES[0] - 1
        with torch.no_grad():
            for layer in (self.body[0], self.body[2]):
                layer.weight.copy_(torch.randn(layer.weight.shape, generator=gen) / np.sqrt(layer.in_features))
                layer.bias.zero_()
            self.head.weight.zero_()
            self.head.bias.zero_()
            if prior_no_finding > 0:
                self.head.bias[N_ACTION_LOGITS] = float(np.log(prior_no_finding * n_claims / (1.0 - prior_no_finding)))
            else:
                self.head.bias[N_ACTION_LOGITS] = -30.0

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(obs))

    def _weights(self) -> list[NDArray[np.float32]]:
        """Numpy views of the parameters (they follow in-place optimizer updates); rebuilt when the
        parameters are new tensors, as after a deep copy."""
        first = self.body[0].weight
        if getattr(self, "_views_of", None) != first.data_ptr():
            self._views = [p.detach().numpy() for p in (first, self.body[0].bias, self.body[2].weight,
                                                        self.body[2].bias, self.head.weight, self.head.bias)]  # fmt: skip
            self._views_of = first.data_ptr()
        return self._views

    def _logits(self, obs: NDArray[np.float32]) -> NDArray[np.float64]:
        """The forward pass in numpy: on these small batches torch's per-call overhead dominates."""
        w = self._weights()
        h = np.maximum(obs @ w[0].T + w[1], 0.0)
        h = np.maximum(h @ w[2].T + w[3], 0.0)
        return (h @ w[4].T + w[5]).astype(np.float64)

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
        "anom_hot": np.rint(o[:, 2] * 3),
        "probes_hot": o[:, 3],
        "probes_rest": o[:, 5],
        "rate_hot": o[:, 6],
        "rate_rest": o[:, 7],
        "confessions": np.rint(o[:, 8] * 3),
        "aware": o[:, 11],
        "coverage": o[:, 24],
    }


class ExperimenterPolicy:
    """Controlled variation: natural probes of each scenario topic, then the most anomalous one against
    control topics, rolling back to re-test.

    Budget fractions keep the plan the same at any turn budget: cover the scenario first; then re-probe
    the most anomalous topic, with about one control probe per two; roll back once the target has voiced
    suspicion or the branch is a quarter of the budget long; stop at `stop_at` of the budget or once three
    anomalies on one topic stand against the rest. Reports that topic only when its anomaly rate clearly
    exceeds the rest's.
    """

    name = "experimenter"

    def __init__(self, stop_at: float = 0.6, branch_limit: float = 0.25) -> None:
        self.stop_at = stop_at
        self.branch_limit = branch_limit

    def act(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        c = _counts(obs)
        covered = c["coverage"] >= 1.0
        decisive = covered & (c["anom_hot"] >= 3) & (c["rate_hot"] - c["rate_rest"] >= 0.25)
        end = (c["t"] >= self.stop_at) | decisive
        restart = (c["aware"] > 0) | (c["branch"] >= self.branch_limit)
        out = np.zeros((obs.shape[0], len(ACTION_SIZES)), dtype=np.int64)
        out[:, TOOL] = np.where(end, END, np.where(restart, ROLLBACK, SEND))
        out[:, TOPIC] = np.where(~covered, SEED_TOPIC, np.where(c["probes_rest"] < 0.5 * c["probes_hot"], CONTROL_TOPIC, HOT_TOPIC))
        return out

    def report(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        c = _counts(obs)
        signal = (c["anom_hot"] >= 2) & (c["rate_hot"] - c["rate_rest"] >= 0.25)
        return np.stack([np.where(signal, CLAIM_HOT, NO_CLAIM), np.where(c["anom_hot"] >= 3, 2, 1)], axis=1)


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
        out = np.zeros((obs.shape[0], len(ACTION_SIZES)), dtype=np.int64)
        out[:, TOOL] = np.where(end & ~first, END, SEND)
        out[:, FRAMING] = np.where(first, NATURAL, DIRECT)
        out[:, PRESSURE] = np.where(first, NO_PRESSURE, np.where(c["t"] >= self.accuse_from, ACCUSE, PUSH))
        return out

    def report(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        c = _counts(obs)
        return np.stack([np.where(c["confessions"] >= 1, CLAIM_CONFESSED, NO_CLAIM), np.full(obs.shape[0], 2)], axis=1)


class BlindPolicy:
    """Ignores everything the target says: reads only its own turn clock.

    It follows the experimenter's plan without its observations (natural probes of the scenario's topics
    in turn, control probes in every third tenth of the budget, a rollback once its branch is a quarter of
    the budget long, stop at `stop_at`),
    and reports the scenario's lead topic with probability `claim_rate`, else no finding.
    """

    name = "blind"

    def __init__(self, claim_rate: float = 0.5, stop_at: float = 0.6, branch_limit: float = 0.25) -> None:
        if not 0.0 <= claim_rate <= 1.0:
            raise ValueError(f"claim_rate must be in [0, 1], got {claim_rate}")
        self.claim_rate = claim_rate
        self.stop_at = stop_at
        self.branch_limit = branch_limit

    def act(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        t, branch = obs[:, 0].astype(np.float64), obs[:, 1].astype(np.float64)
        out = np.zeros((obs.shape[0], len(ACTION_SIZES)), dtype=np.int64)
        out[:, TOOL] = np.where(t >= self.stop_at, END, np.where(branch >= self.branch_limit, ROLLBACK, SEND))
        out[:, TOPIC] = np.where(np.floor(t * 10) % 3 == 2, CONTROL_TOPIC, SEED_TOPIC)
        return out

    def report(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        claim = rng.random(obs.shape[0]) < self.claim_rate
        return np.stack([np.where(claim, CLAIM_SEED, NO_CLAIM), np.ones(obs.shape[0], dtype=np.int64)], axis=1)


def baselines(blind_claim_rate: float = 0.5) -> list[RandomPolicy | ExperimenterPolicy | InterrogatorPolicy | BlindPolicy]:
    """The reference auditors every trained policy is compared with."""
    return [RandomPolicy(), BlindPolicy(blind_claim_rate), ExperimenterPolicy(), InterrogatorPolicy()]
