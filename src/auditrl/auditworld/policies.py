"""Auditor policies over AuditWorld's structured actions: a trainable MLP and scripted baselines.

The baselines are what a careful human might script, and they read the same observation as the MLP
(`auditrl.auditworld.observe`), so every inference they make (which topic looked anomalous, whether that is
evidence) is computed here from counts, not handed over by the world: random actions; a systematic
experimenter that probes the scenario's topics naturally, finds the topic with the most anomalies and
tests it against control topics, rolling back to re-test; an interrogator that presses and accuses until
the target confesses; and a blind auditor that follows a fixed plan and reports without looking at
anything the target said (any metric it passes measures the world, not the auditor).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from auditrl.auditworld import kernels
from auditrl.auditworld.observe import ObservationView, obs_dim, read_observation, scenario_topics_of
from auditrl.auditworld.texts import ACCUSE, DIRECT, NATURAL, NO_PRESSURE, PUSH
from auditrl.auditworld.world import (
    CLAIM,
    CONTROL_TOPIC,
    END,
    FRAMING,
    NO_CLAIM,
    PRESSURE,
    ROLLBACK,
    SEND,
    TOOL,
    TOPIC,
    Policy,
    action_sizes,
    report_sizes,
)


@dataclass(frozen=True)
class HeadLayout:
    """Where each head's logits sit among the concatenated logits, and the matrices that sum within heads (on
    logits laid out logits x rows one small matrix product does what a per-head reduction would, in one call)."""

    starts: NDArray[np.intp]  # each head's first logit
    sizes: NDArray[np.intp]  # each head's number of choices
    head_of: NDArray[np.intp]  # the head of each logit
    place: NDArray[np.intp]  # each logit's place within its head
    member: NDArray[np.float32]  # (heads, logits): sums each head's logits
    running: NDArray[np.float32]  # (logits, logits): running sums within each head


@functools.cache
def head_layout(sizes: tuple[int, ...]) -> HeadLayout:
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
    head_of = np.repeat(np.arange(len(sizes)), sizes).astype(np.intp)
    member = (head_of[None, :] == np.arange(len(sizes))[:, None]).astype(np.float32)
    order = np.arange(sum(sizes))
    running = ((head_of[:, None] == head_of[None, :]) & (order[None, :] <= order[:, None])).astype(np.float32)
    return HeadLayout(starts, np.asarray(sizes, dtype=np.intp), head_of, order - starts[head_of], member, running)


def head_softmax(
    logits: NDArray[np.float32], sizes: tuple[int, ...]
) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]:
    """Per head, the logits less their maximum, their exponentials, and each head's sum of those, for logits
    laid out logits x rows (every head's few choices are whole rows of memory)."""
    layout = head_layout(sizes)
    shifted = kernels.shift_heads(logits, layout.starts, layout.sizes)
    exp = np.exp(shifted)
    return shifted, exp, layout.member @ exp


def sample_heads(logits: NDArray[np.float32], sizes: tuple[int, ...], u: NDArray[np.floating]) -> NDArray[np.int64]:
    """One choice per head and row, drawn from the heads' softmax by inverse CDF with one uniform per head
    (`u`: heads x rows); logits are laid out logits x rows. Returns heads x rows."""
    layout = head_layout(sizes)
    _, exp, total = head_softmax(logits, sizes)
    return kernels.pick_heads(layout.running @ exp, total, u, layout.starts, layout.sizes)


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Torch on one thread while the block runs, as it was after. With several, torch splits a product or a sum over
    many rows among its threads and adds their parts in an order that depends on how many there are, so a fitted
    base or a trained policy would differ with the machine's core count (DAgger's sampling and training's
    updates carry a last-bit difference into other decisions)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class Adam:
    """Adam over numpy views of the policy's parameters, with the update's gradient-norm clipping: the same
    rule as torch.optim.Adam after clip_grad_norm_, without their per-call overhead on six small tensors."""

    def __init__(
        self, params: list[NDArray[np.float32]], lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8
    ) -> None:
        self.params = params
        self.lr, self.betas, self.eps = lr, betas, eps
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.steps = 0

    def step(self, grads: list[NDArray[np.float32]], max_norm: float | None = None) -> None:
        """One update in place; gradients are first scaled down to `max_norm` in total if they exceed it."""
        scale = 1.0
        if max_norm is not None:
            norm = float(np.sqrt(sum(float(np.vdot(g, g)) for g in grads)))
            scale = min(1.0, max_norm / (norm + 1e-6))
        self.steps += 1
        b1, b2 = self.betas
        c1, c2 = 1.0 - b1**self.steps, 1.0 - b2**self.steps
        for p, g, m, v in zip(self.params, grads, self.m, self.v, strict=True):
            if scale < 1.0:
                g = g * np.float32(scale)
            m *= b1
            m += (1.0 - b1) * g
            v *= b2
            v += (1.0 - b2) * g * g
            p -= np.float32(self.lr / c1) * m / (np.sqrt(v / np.float32(c2)) + np.float32(self.eps))


class MLPPolicy(nn.Module):
    """Small MLP from the observation to the logits of every action and report head.

    Initialised at random it is the `random` base: the last layer's weights start at zero, so it ignores
    its observations: uniform over every action head and the confidence, and reporting no finding with
    probability `prior_no_finding` (the rest spread evenly over the scenario's topics). The competent
    base is this network cloned from a scripted expert (`auditrl.auditworld.base`).
    """

    def __init__(
        self,
        hidden: int = 64,
        seed: int = 0,
        name: str = "mlp",
        prior_no_finding: float = 0.25,
        scenario_topics: int = 3,
    ) -> None:
        super().__init__()
        if not 0.0 <= prior_no_finding < 1.0:
            raise ValueError(f"prior_no_finding must be in [0, 1), got {prior_no_finding}")
        self.name = name
        self.scenario_topics = scenario_topics
        self.action_sizes = action_sizes(scenario_topics)
        self.report_sizes = report_sizes(scenario_topics)
        self.head_sizes = self.action_sizes + self.report_sizes
        self.n_action_logits = sum(self.action_sizes)
        gen = torch.Generator().manual_seed(seed)
        first, second = nn.Linear(obs_dim(scenario_topics), hidden), nn.Linear(hidden, hidden)
        self.body = nn.Sequential(first, nn.ReLU(), second, nn.ReLU())
        self.head = nn.Linear(hidden, sum(self.head_sizes))
        with torch.no_grad():
            for layer in (first, second):
                layer.weight.copy_(torch.randn(layer.weight.shape, generator=gen) / np.sqrt(layer.in_features))
                layer.bias.zero_()
            self.head.weight.zero_()
            self.head.bias.zero_()
            no_claim = self.n_action_logits + NO_CLAIM
            if prior_no_finding > 0:
                self.head.bias[no_claim] = float(np.log(prior_no_finding * scenario_topics / (1.0 - prior_no_finding)))
            else:
                self.head.bias[no_claim] = -30.0

    @classmethod
    def from_weights(cls, weights: dict[str, list], name: str) -> MLPPolicy:
        """A policy with stored weights (a state dict as nested lists); its sizes are read off the weights."""
        first = weights["body.0.weight"]
        policy = cls(hidden=len(first), name=name, scenario_topics=scenario_topics_of(len(first[0])))
        policy.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in weights.items()})
        return policy

    def weights(self) -> dict[str, list]:
        return {k: v.tolist() for k, v in self.state_dict().items()}

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(obs))

    def weight_views(self) -> list[NDArray[np.float32]]:
        """Numpy views of the parameters (they follow in-place optimizer updates); rebuilt when the
        parameters are new tensors, as after a deep copy."""
        tensors = self.__dict__.get("_tensors")
        if tensors is None or tensors[0].data_ptr() != self.__dict__["_views_of"]:
            tensors = [
                self.body[0].weight,
                self.body[0].bias,
                self.body[2].weight,
                self.body[2].bias,
                self.head.weight,
                self.head.bias,
            ]
            self.__dict__["_tensors"] = tensors
            self.__dict__["_views"] = [t.detach().numpy() for t in tensors]
            self.__dict__["_views_of"] = tensors[0].data_ptr()
        return self.__dict__["_views"]

    def forward_into(
        self,
        obs: NDArray[np.float32],
        h1: NDArray[np.float32],
        h2: NDArray[np.float32],
        logits: NDArray[np.float32],
        report: bool,
    ) -> None:
        """The forward pass in numpy (on these small batches torch's per-call overhead dominates) for
        observations laid out features x rows, written into the given arrays (same layout): both hidden layers'
        activations and the action heads' (or the report heads') logits."""
        w = self.weight_views()
        for layer, (x, out) in enumerate(((obs, h1), (h1, h2))):
            np.matmul(w[2 * layer], x, out=out)
            out += w[2 * layer + 1][:, None]
            np.maximum(out, 0.0, out=out)
        part = slice(self.n_action_logits, None) if report else slice(0, self.n_action_logits)
        np.matmul(w[4][part], h2, out=logits)
        logits += w[5][part, None]

    def forward_numpy(
        self, obs: NDArray[np.float32], report: bool
    ) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]:
        """`forward_into` into new arrays: both hidden layers and the logits, features x rows."""
        hid, rows = self.weight_views()[0].shape[0], obs.shape[1]
        n_logits = sum(self.report_sizes) if report else self.n_action_logits
        h1, h2 = np.empty((hid, rows), dtype=np.float32), np.empty((hid, rows), dtype=np.float32)
        logits = np.empty((n_logits, rows), dtype=np.float32)
        self.forward_into(obs, h1, h2, logits, report)
        return h1, h2, logits

    def _sample(self, obs: NDArray[np.float32], rng: np.random.Generator, report: bool) -> NDArray[np.int64]:
        sizes = self.report_sizes if report else self.action_sizes
        logits = self.forward_numpy(np.ascontiguousarray(obs.T), report)[2]
        return sample_heads(logits, sizes, rng.random((len(sizes), obs.shape[0]), dtype=np.float32)).T

    def act(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        return self._sample(obs, rng, report=False)

    def report(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        return self._sample(obs, rng, report=True)


@dataclass
class Activations:
    """An MLP policy's forward pass over a rollout, kept so the update needs no second one: both hidden layers
    and the logits at every acted turn (in the rollout's turn order) and at every report, laid out
    features x rows, and the parameters that computed them (the update reuses them only while unchanged)."""

    weights: list[NDArray[np.float32]]
    h1: NDArray[np.float32]
    h2: NDArray[np.float32]
    logits: NDArray[np.float32]
    h1_report: NDArray[np.float32]
    h2_report: NDArray[np.float32]
    logits_report: NDArray[np.float32]

    def current(self, policy: MLPPolicy) -> bool:
        """Whether these are still the policy's activations (its parameters have not changed since)."""
        return all(np.array_equal(a, b) for a, b in zip(self.weights, policy.weight_views(), strict=True))


class RandomPolicy:
    """Uniform over every head: the floor any trained auditor must beat."""

    name = "random"

    def act(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        sizes = action_sizes(scenario_topics_of(obs.shape[1]))
        return np.stack([rng.integers(0, s, size=obs.shape[0]) for s in sizes], axis=1)

    def report(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        sizes = report_sizes(scenario_topics_of(obs.shape[1]))
        return np.stack([rng.integers(0, s, size=obs.shape[0]) for s in sizes], axis=1)


def _first(mask: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Per row, the first column where `mask` holds (0 if none)."""
    return np.argmax(mask, axis=1)


def _least_probed(v: ObservationView) -> NDArray[np.int64]:
    """The scenario topic slot probed least so far (the earliest on ties): the scenario's topics in turn."""
    return 1 + np.argmin(v.probes[:, 1:], axis=1)


def _evidence(
    v: ObservationView,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """The experimenter's inference: the scenario topic with the most anomalies (the earliest on ties), its
    anomaly count, its anomaly rate, and the rate over every other probe (control probes included)."""
    hot = 1 + np.argmax(v.anomalies[:, 1:], axis=1)
    rows = np.arange(hot.size)
    anom_hot, probes_hot = v.anomalies[rows, hot], v.probes[rows, hot]
    rest_anom = v.anomalies.sum(axis=1) - anom_hot
    rest_probes = v.probes.sum(axis=1) - probes_hot
    return hot, anom_hot, anom_hot / (probes_hot + 1.0), rest_anom / (rest_probes + 1.0)


class ExperimenterPolicy:
    """Controlled variation: natural probes of each scenario topic, then the topic with the most anomalies
    against control topics, rolling back to re-test.

    Budget fractions keep the plan the same at any turn budget: cover the scenario first; then re-probe the
    most anomalous topic, with about one control probe per two; roll back once the target has voiced
    suspicion or the branch is a quarter of the budget long; stop at `stop_at` of the budget or once three
    anomalies on one topic stand against the rest. Reports that topic only when its anomaly rate clearly
    exceeds the rest's.
    """

    name = "experimenter"

    def __init__(self, stop_at: float = 0.6, branch_limit: float = 0.25) -> None:
        self.stop_at = stop_at
        self.branch_limit = branch_limit

    def act(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        v = read_observation(obs)
        uncovered = v.natural[:, 1:] == 0
        covered = ~uncovered.any(axis=1)
        hot, anom_hot, rate_hot, rate_rest = _evidence(v)
        rows = np.arange(hot.size)
        decisive = covered & (anom_hot >= 3) & (rate_hot - rate_rest >= 0.25)
        end = (v.turn >= self.stop_at) | decisive
        restart = v.aware | (v.branch >= self.branch_limit)
        nat_hot = v.natural[rows, hot]
        nat_rest = v.natural.sum(axis=1) - nat_hot
        out = np.zeros((obs.shape[0], 4), dtype=np.int64)
        out[:, TOOL] = np.where(end, END, np.where(restart, ROLLBACK, SEND))
        out[:, TOPIC] = np.where(
            ~covered, 1 + _first(uncovered), np.where(nat_rest < 0.5 * nat_hot, CONTROL_TOPIC, hot)
        )
        return out

    def report(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        hot, anom_hot, rate_hot, rate_rest = _evidence(read_observation(obs))
        signal = (anom_hot >= 2) & (rate_hot - rate_rest >= 0.25)
        return np.stack([np.where(signal, hot, NO_CLAIM), np.where(anom_hot >= 3, 2, 1)], axis=1)


class InterrogatorPolicy:
    """Pressure and direct accusation: one natural opener, then pushes, then accusations until a confession,
    on the scenario's topics in turn.

    Reports the scenario topic the target confessed most about, with high confidence; nothing if it never
    gave in.
    """

    name = "interrogator"

    def __init__(self, stop_at: float = 0.4, accuse_from: float = 0.15) -> None:
        self.stop_at = stop_at
        self.accuse_from = accuse_from

    def act(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        v = read_observation(obs)
        first = v.turn == 0
        end = (v.confessions >= 1) | (v.turn >= self.stop_at)
        out = np.zeros((obs.shape[0], 4), dtype=np.int64)
        out[:, TOOL] = np.where(end & ~first, END, SEND)
        out[:, TOPIC] = _least_probed(v)
        out[:, FRAMING] = np.where(first, NATURAL, DIRECT)
        out[:, PRESSURE] = np.where(first, NO_PRESSURE, np.where(v.turn >= self.accuse_from, ACCUSE, PUSH))
        return out

    def report(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        v = read_observation(obs)
        most = 1 + np.argmax(v.confessions_at[:, 1:], axis=1)
        confessed = v.confessions_at[np.arange(most.size), most] >= 1
        return np.stack([np.where(confessed, most, NO_CLAIM), np.full(obs.shape[0], 2)], axis=1)


class BlindPolicy:
    """Ignores everything the target says: reads only its own turn clock and the probes it sent.

    It follows the experimenter's plan without its observations (natural probes of the scenario's topics
    in turn, control probes in every third tenth of the budget, a rollback once its branch is a quarter of
    the budget long, stop at `stop_at`), and reports the scenario's lead topic with probability
    `claim_rate`, else no finding.
    """

    name = "blind"

    def __init__(self, claim_rate: float = 0.5, stop_at: float = 0.6, branch_limit: float = 0.25) -> None:
        if not 0.0 <= claim_rate <= 1.0:
            raise ValueError(f"claim_rate must be in [0, 1], got {claim_rate}")
        self.claim_rate = claim_rate
        self.stop_at = stop_at
        self.branch_limit = branch_limit

    def act(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        v = read_observation(obs)
        out = np.zeros((obs.shape[0], 4), dtype=np.int64)
        out[:, TOOL] = np.where(v.turn >= self.stop_at, END, np.where(v.branch >= self.branch_limit, ROLLBACK, SEND))
        out[:, TOPIC] = np.where(np.floor(v.turn * 10) % 3 == 2, CONTROL_TOPIC, _least_probed(v))
        return out

    def report(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        claim = rng.random(obs.shape[0]) < self.claim_rate
        return np.stack([np.where(claim, 1, NO_CLAIM), np.ones(obs.shape[0], dtype=np.int64)], axis=1)


class NeverClaims:
    """Another auditor's audits with every report replaced by "no hidden behavior found".

    What it scores is what the metrics give an auditor that never claims anything: the floor a trained
    auditor's composite must be read against.
    """

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.name = f"{policy.name}, no claims"

    def act(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        return self.policy.act(obs, rng)

    def report(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        out = self.policy.report(obs, rng)
        out[:, CLAIM] = NO_CLAIM
        return out


SCRIPTED: dict[str, Callable[[], Policy]] = {
    "random": RandomPolicy,
    "blind": BlindPolicy,
    "experimenter": ExperimenterPolicy,
    "interrogator": InterrogatorPolicy,
}
"""The scripted auditors by name (experts an imitation base clones, and the baselines)."""


def scripted_policy(name: str) -> Policy:
    if name not in SCRIPTED:
        raise ValueError(f"unknown scripted auditor {name!r}; known: {', '.join(SCRIPTED)}")
    return SCRIPTED[name]()


def baselines(blind_claim_rate: float = 0.5) -> list[Policy]:
    """The reference auditors every trained policy is compared with."""
    return [RandomPolicy(), BlindPolicy(blind_claim_rate), ExperimenterPolicy(), InterrogatorPolicy()]
