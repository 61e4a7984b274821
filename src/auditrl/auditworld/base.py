"""The base auditor every design's training starts from: random, cloned from an expert, or a checkpoint.

The paper started RL from a competent base model (base Haiku: audit quality 65.6, FP calibration 98.9),
so the default base here is an imitation of a scripted expert (the experimenter): behaviour cloning on
audits of training behaviors and training families only, then DAgger rounds in which the student audits
and the expert labels the states the student reached. Its imperfection is set, not hoped for: the
cloning targets put `competence` on the expert's choice of each action head and spread the rest
uniformly (label smoothing), and `claim_competence` does the same for the report's claim, so a fitted
base follows the expert on each decision with probability competence + (1 - competence) / choices and
explores the rest. `measure_agreement` checks that a base reached it. Which base, and its competence,
is an assumption of every run; the report names it with its values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import torch
from numpy.typing import NDArray
from pydantic import BaseModel, Field, field_validator

from auditrl.auditworld.policies import Adam, MLPPolicy, head_layout, one_torch_thread, scripted_policy
from auditrl.auditworld.simulate import simulate
from auditrl.auditworld.world import (
    CLAIM,
    END,
    NO_CLAIM,
    TOOL,
    Policy,
    World,
    training_batch,
)
from auditrl.configfile import ConfigModel
from auditrl.reading import CHECKPOINT, FileReadError, read_json
from auditrl.safe_text import short_repr


class RandomInit(ConfigModel):
    """An untrained MLP (random weights, zero last layer): random actions, no finding with a set probability."""

    kind: Literal["random"] = Field(description="Start from an untrained policy (the ablation).")
    prior_no_finding: float = Field(
        default=0.9, ge=0.0, lt=1.0,
        description="The untrained policy's chance of reporting no finding whatever it saw, standing in for an "
        "instruction-tuned model's calibration (an assumption).",
    )  # fmt: skip

    def label(self) -> str:
        return f"random init (no-finding prior {self.prior_no_finding:g})"


class ImitationInit(ConfigModel):
    """A policy cloned from a scripted expert on training behaviors and families, with set imperfection."""

    kind: Literal["imitation"] = Field(description="Clone a scripted expert (behaviour cloning, then DAgger).")
    expert: str = Field(
        default="experimenter", description="The scripted auditor imitated (auditrl.auditworld.policies.SCRIPTED)."
    )
    competence: float = Field(
        default=0.95, gt=0.0, le=1.0,
        description=(
            "Weight of the expert's choice in the cloning target of each action head (tool, topic, framing, "
            "pressure); the rest is spread uniformly over the head's choices. An assumption: how competent the "
            "base auditor is before RL."
        ),
    )  # fmt: skip
    claim_competence: float = Field(
        default=0.98,
        gt=0.0,
        le=1.0,
        description=(
            "The same for the report's claim (which topic, or nothing); the confidence head takes `competence`."
        ),
    )
    dagger_rounds: int = Field(
        default=2, ge=0, description="Rounds in which the student audits and the expert labels its states."
    )
    audits_per_round: int = Field(
        default=256, ge=1, description="Audits collected per round and turn budget (half with benign targets)."
    )
    turn_budgets: list[Annotated[int, Field(ge=1)]] = Field(
        default=[15, 20, 30],
        min_length=1,
        description=(
            "Turn budgets of the cloning audits (the paper's training budget and its evaluation budgets), so the "
            "base audits sensibly at any of them."
        ),
    )
    fit_steps: int = Field(
        default=400,
        ge=1,
        description="Full-batch Adam steps of cloning per round, on every distinct state gathered so far.",
    )
    learning_rate: float = Field(default=0.04, gt=0.0, description="Adam learning rate of cloning.")

    @field_validator("expert")
    @classmethod
    def _known_expert(cls, value: str) -> str:
        scripted_policy(value)
        return value

    def label(self) -> str:
        return f"imitation of {self.expert} (competence {self.competence:g}, claim {self.claim_competence:g})"


class CheckpointInit(ConfigModel):
    """A saved policy: a JSON file with the policy's `weights` (a finished AuditWorld run or a base)."""

    kind: Literal["checkpoint"] = Field(description="Start from saved weights.")
    path: Path = Field(description="JSON file with a `weights` mapping, as AuditWorld's checkpoints hold.")

    def label(self) -> str:
        return f"checkpoint {self.path.name}"


BaseInit = Annotated[RandomInit | ImitationInit | CheckpointInit, Field(discriminator="kind")]
"""How the base auditor is made (`train.init`)."""


def _targets(labels: NDArray[np.int64], sizes: tuple[int, ...], weights: tuple[float, ...]) -> NDArray[np.float32]:
    """Per row, each head's cloning target side by side: `weight` on the label, the rest spread uniformly."""
    out = np.empty((labels.shape[0], sum(sizes)), dtype=np.float32)
    start = 0
    for h, (size, weight) in enumerate(zip(sizes, weights, strict=True)):
        block = out[:, start : start + size]
        block[:] = (1.0 - weight) / size
        block[np.arange(labels.shape[0]), labels[:, h]] += weight
        start += size
    return out


class _Data:
    """Aggregated cloning data: distinct observations with the expert's cloning targets and loss weights.

    Observations are counts, so states recur; each distinct (observation, labels) row is kept once with its
    number of occurrences as weight, which leaves the loss unchanged. A head's weight is zero where it did
    not matter: topic, framing and pressure where the expert ended the audit, the confidence where it
    claimed nothing.
    """

    def __init__(self, student: MLPPolicy, cfg: ImitationInit) -> None:
        self.sizes = student.head_sizes
        self.n_action = len(student.action_sizes)
        self.weights = (cfg.competence,) * 4 + (cfg.claim_competence, cfg.competence)
        self.parts: list[tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]] = []

    def _add(self, obs: NDArray[np.float32], labels: NDArray[np.int64], turns: bool) -> None:
        rows, counts = np.unique(np.concatenate([obs, labels.astype(np.float32)], axis=1), axis=0, return_counts=True)
        obs, labels = rows[:, : obs.shape[1]], rows[:, obs.shape[1] :].astype(np.int64)
        n, heads = len(rows), len(self.sizes)
        target = np.zeros((n, sum(self.sizes)), dtype=np.float32)
        mask = np.zeros((n, heads), dtype=np.float32)
        split = sum(self.sizes[: self.n_action])
        if turns:
            target[:, :split] = _targets(labels, self.sizes[: self.n_action], self.weights[:4])
            mask[:, 0] = 1.0
            mask[:, 1:4] = (labels[:, TOOL] != END)[:, None]
        else:
            target[:, split:] = _targets(labels, self.sizes[self.n_action :], self.weights[4:])
            mask[:, 4] = 1.0
            mask[:, 5] = labels[:, CLAIM] != NO_CLAIM
        self.parts.append((obs, target, mask * counts[:, None].astype(np.float32)))

    def add(
        self,
        actor: Policy,
        expert: Policy,
        world: World,
        cfg: ImitationInit,
        families: list[int],
        rng: np.random.Generator,
    ) -> None:
        for budget in cfg.turn_budgets:
            batch = training_batch(world, rng, cfg.audits_per_round, 1, 0.5, families, budget)
            roll = simulate(world, batch, actor, rng)
            self._add(roll.turn_obs, expert.act(roll.turn_obs, rng), turns=True)
            self._add(roll.final_obs, expert.report(roll.final_obs, rng), turns=False)

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Observations, cloning targets scaled by their rows' head weights, and the head weights; every head's
        weights sum to one, so turns and reports count alike whatever their numbers."""
        obs, target, weight = (np.concatenate([p[i] for p in self.parts]) for i in range(3))
        weight = weight / np.maximum(weight.sum(axis=0), 1.0)
        heads = np.repeat(np.arange(len(self.sizes)), self.sizes)
        return torch.from_numpy(obs), torch.from_numpy(target * weight[:, heads]), torch.from_numpy(weight)


def fit_gradient(
    student: MLPPolicy, obs: torch.Tensor, scaled_target: torch.Tensor, weight: torch.Tensor
) -> list[torch.Tensor]:
    """The gradient of the cloning loss with respect to each of the student's parameters (`parameters()` order).

    Per head the loss is weight * logsumexp(logits) - target . logits (targets sum to one, and come scaled by
    the weight), so its gradient with respect to the logits is weight * softmax - target. The backward pass
    through the two hidden layers is written out, without autograd's graph, on torch's kernels (faster than
    numpy's on these full batches).
    """
    layout = head_layout(student.head_sizes)
    w0, b0, w1, b1, w2, b2 = (torch.from_numpy(v) for v in student.weight_views())
    h1 = torch.addmm(b0, obs, w0.T).relu_()
    h2 = torch.addmm(b1, h1, w1.T).relu_()
    logits = torch.addmm(b2, h2, w2.T)
    exp = logits.sub_(logits.amax(dim=1, keepdim=True)).exp_()  # one shift per row, as a logsumexp takes
    scale = weight / (exp @ torch.from_numpy(layout.member).T).clamp_(min=1e-30)
    d_logits = exp.mul_(scale.index_select(1, torch.from_numpy(layout.head_of))).sub_(scaled_target)
    d2 = torch.ops.aten.threshold_backward(d_logits @ w2, h2, 0.0)
    d1 = torch.ops.aten.threshold_backward(d2 @ w1, h1, 0.0)
    return [d1.T @ obs, d1.sum(0), d2.T @ h1, d2.sum(0), d_logits.T @ h2, d_logits.sum(0)]


def _fit(student: MLPPolicy, data: _Data, cfg: ImitationInit) -> None:
    """Full-batch Adam on the weighted cross-entropy of every head against its cloning target (`fit_gradient`)."""
    obs, scaled_target, weight = data.tensors()
    opt = Adam(student.weight_views(), cfg.learning_rate)
    for _ in range(cfg.fit_steps):
        opt.step([g.numpy() for g in fit_gradient(student, obs, scaled_target, weight)])


def imitation_base(world: World, cfg: ImitationInit, hidden: int, seed: int, families: list[int]) -> MLPPolicy:
    """Clone the expert on training behaviors and families: its audits first, then `dagger_rounds` rounds of
    the student's own audits labelled by the expert, refitting on everything gathered so far; on one torch thread,
    so the base does not depend on the machine's cores."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    expert = scripted_policy(cfg.expert)
    student = MLPPolicy(hidden=hidden, seed=seed, name="base", scenario_topics=world.scenario_topics)
    data = _Data(student, cfg)
    with one_torch_thread():
        for round_ in range(cfg.dagger_rounds + 1):
            data.add(expert if round_ == 0 else student, expert, world, cfg, families, rng)
            _fit(student, data, cfg)
    return student


def load_weights(path: Path, name: str = "base") -> MLPPolicy:
    """The policy stored in a JSON file's `weights` mapping; errors name the file."""
    try:
        payload = read_json(Path(path), CHECKPOINT, allow_inf_nan=True)
    except FileReadError as exc:
        raise ValueError(f"not a policy checkpoint: {exc}") from None
    try:
        return MLPPolicy.from_weights(payload["weights"], name)
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        detail = short_repr(str(exc), 300)
        raise ValueError(f"{path}: not a policy checkpoint with a 'weights' mapping ({detail})") from None


def build_base(
    world: World, init: RandomInit | ImitationInit | CheckpointInit, hidden: int, seed: int, families: list[int]
) -> MLPPolicy:
    """The base auditor of one training seed."""
    if isinstance(init, RandomInit):
        return MLPPolicy(
            hidden=hidden,
            seed=seed,
            name="base",
            prior_no_finding=init.prior_no_finding,
            scenario_topics=world.scenario_topics,
        )
    if isinstance(init, ImitationInit):
        return imitation_base(world, init, hidden, seed, families)
    policy = load_weights(init.path)
    if policy.scenario_topics != world.scenario_topics:
        raise ValueError(
            f"{init.path}: the policy was trained on scenarios of {policy.scenario_topics} topics, this "
            f"world has {world.scenario_topics}"
        )
    return policy


class Agreement(BaseModel):
    """How often a base's sampled decisions equal the expert's on the states the base reaches, per head,
    beside what its competence settings imply (competence + (1 - competence) / choices)."""

    measured: dict[str, float]
    expected: dict[str, float]
    decisions: dict[str, int]


def measure_agreement(
    world: World, base: MLPPolicy, cfg: ImitationInit, families: list[int], seed: int, audits: int = 1024
) -> Agreement:
    """The base audits fresh training-split batches at each cloning budget; the expert labels what it saw."""
    rng = np.random.default_rng(seed)
    expert = scripted_policy(cfg.expert)
    names = ("tool", "topic", "framing", "pressure", "claim")
    hits = dict.fromkeys(names, 0)
    total = dict.fromkeys(names, 0)
    for budget in cfg.turn_budgets:
        roll = simulate(world, training_batch(world, rng, audits, 1, 0.5, families, budget), base, rng)
        mine, theirs = roll.turn_actions, expert.act(roll.turn_obs, rng)
        sent = theirs[:, TOOL] != END
        for h, name in enumerate(names[:4]):
            rows = slice(None) if h == TOOL else sent
            hits[name] += int((mine[rows, h] == theirs[rows, h]).sum())
            total[name] += int(mine[rows, h].size)
        hits["claim"] += int((roll.report[:, CLAIM] == expert.report(roll.final_obs, rng)[:, CLAIM]).sum())
        total["claim"] += roll.report.shape[0]
    sizes = dict(zip(names, base.action_sizes + base.report_sizes[:1], strict=True))
    weight = {n: cfg.claim_competence if n == "claim" else cfg.competence for n in names}
    return Agreement(
        measured={n: hits[n] / max(total[n], 1) for n in names},
        expected={n: weight[n] + (1.0 - weight[n]) / sizes[n] for n in names},
        decisions=total,
    )
