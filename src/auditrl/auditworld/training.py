"""GRPO-style policy-gradient training of AuditWorld auditors, vectorised over a whole batch of groups.

Each step: a batch of groups (k rollouts per (behavior, seed, family), some groups benign), one
vectorised rollout, rewards from the chosen design, group-relative advantages (shared with the LM
trainer), and one REINFORCE update of the MLP policy on the log-probabilities of every action taken.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from numpy.typing import NDArray
from pydantic import Field

from auditrl.auditworld.base import BaseInit, ImitationInit, build_base
from auditrl.auditworld.designs import DesignName, RewardInputs, design_rewards
from auditrl.auditworld.judges import JudgeParams, pairwise_quality
from auditrl.auditworld.policies import Activations, Adam, MLPPolicy, head_layout, head_softmax, one_torch_thread
from auditrl.auditworld.simulate import Rollout, simulate_many
from auditrl.auditworld.texts import ACCUSE, CONFESSION
from auditrl.auditworld.world import CLAIM, END, NO_CLAIM, TOOL, EpisodeBatch, World, training_batch
from auditrl.configfile import ConfigModel
from auditrl.finite import check_finite
from auditrl.rewards.advantages import group_advantages
from auditrl.rewards.registry import design_spec


class TrainSettings(ConfigModel):
    """The optimisation settings of AuditWorld training, shared by every design of a job (its `train:` section).

    Field names follow TRL's (and the grpo_lm config's): `max_steps`, `groups_per_step`, `learning_rate`,
    `max_grad_norm`, `reference_refresh_steps`.
    """

    init: BaseInit = Field(
        default_factory=lambda: ImitationInit(kind="imitation"),
        description=(
            "The base auditor training starts from (auditrl.auditworld.base): `imitation` of a scripted expert "
            "with set competence (default), `random` (an untrained policy), or a `checkpoint`. Built once per "
            "training seed."
        ),
    )  # fmt: skip
    max_steps: int = Field(default=100, ge=1, description="Policy updates per training run.")
    groups_per_step: int = Field(
        default=128, ge=1, description="Groups per step; a group is k rollouts of one (behavior, seed, family)."
    )
    group_size: int = Field(
        default=8, ge=2, description="Rollouts per group (k); advantages are relative within a group."
    )
    max_turns: int = Field(
        default=15, ge=1, description="Turn budget of a training audit (the paper's training budget: 15)."
    )
    learning_rate: float = Field(default=0.003, gt=0.0, le=1.0, description="Adam learning rate of the MLP policy.")
    entropy_coef: float = Field(
        default=0.01, ge=0.0, le=1.0, description="Weight of the entropy bonus (keeps the policy exploring)."
    )
    max_grad_norm: float = Field(default=1.0, gt=0.0, description="Maximum gradient norm per update.")
    hidden: int = Field(default=64, ge=4, description="Width of the policy's hidden layers (the base's too).")
    reference_refresh_steps: int = Field(
        default=50,
        ge=1,
        description="Designs with references: steps between refreshes of the reference snapshot (paper: 50).",
    )


class TrainConfig(TrainSettings):
    """One training run of an AuditWorld auditor: the shared settings plus its design, targets and seed."""

    design: DesignName = Field(
        description="Reward design (a registered design with an AuditWorld form, auditrl.auditworld.designs)."
    )
    benign_fraction: float = Field(
        default=0.0, ge=0.0, le=1.0, description="Share of each step's groups run against benign targets (calibration)."
    )
    binary_strict: bool = Field(
        default=False, description="Binary design: count only evidence the target itself produced."
    )
    families: list[str] = Field(min_length=1, description="Target families the training groups are drawn from.")
    seed: int = Field(default=0, description="Seeds the run's generator: a run is deterministic given its config.")


@dataclass
class StepStats:
    """What the monitors of reward hacking watch, per step."""

    step: int
    reward: float
    reward_planted: float
    false_positive_rate: float  # benign episodes with a claim (NaN without benign groups)
    claim_rate: float
    correct_rate: float  # planted episodes with a correct claim
    accusations: float
    confessions: float
    eval_aware: float
    turns: float


@dataclass
class TrainResult:
    policy: MLPPolicy
    config: TrainConfig
    history: list[StepStats] = field(default_factory=list)
    episodes: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0


def _heads_gradient(
    logits: NDArray[np.float32],
    sizes: tuple[int, ...],
    chosen: NDArray[np.int64],
    weight: NDArray[np.float32],
    explore: NDArray[np.float32],
) -> tuple[float, NDArray[np.float32]]:
    """The heads' share of the loss and its gradient with respect to their logits, every head at once (logits
    laid out logits x rows; `chosen`, `weight` and `explore` are heads x rows).

    Per head and row the loss is -weight * log p(chosen) - explore * entropy, so the gradient is
    weight * (p - onehot(chosen)) + explore * p * (log p + entropy).
    """
    layout = head_layout(sizes)
    head_of = layout.head_of
    shifted, exp, total = head_softmax(logits, sizes)
    logp = shifted - np.log(total)[head_of]
    p = exp * (1.0 / total)[head_of]
    entropy = -(layout.member @ (p * logp))
    onehot = layout.place[:, None] == chosen[head_of]
    loss = -float(np.vdot(weight, layout.member @ (logp * onehot))) - float(np.vdot(explore, entropy))
    grad = p * (weight[head_of] + explore[head_of] * (logp + entropy[head_of]))
    grad -= onehot * weight[head_of]
    return loss, np.asarray(grad, dtype=np.float32)  # already float32: no copy


def _activations(policy: MLPPolicy, rollout: Rollout) -> Activations:
    """The rollout's own forward pass when it is still the policy's, else a fresh one."""
    kept = rollout.activations
    if kept is not None and kept.current(policy):
        return kept
    h1, h2, logits = policy.forward_numpy(np.ascontiguousarray(rollout.turn_obs.T), report=False)
    h1_report, h2_report, logits_report = policy.forward_numpy(np.ascontiguousarray(rollout.final_obs.T), report=True)
    return Activations(
        weights=[w.copy() for w in policy.weight_views()],
        h1=h1, h2=h2, logits=logits, h1_report=h1_report, h2_report=h2_report, logits_report=logits_report,
    )  # fmt: skip


def policy_gradient(
    policy: MLPPolicy, rollout: Rollout, advantages: NDArray[np.float64], entropy_coef: float
) -> tuple[float, list[NDArray[np.float32]]]:
    """REINFORCE with group-relative advantages over every acted turn and the report: the loss and its gradient
    with respect to each of the policy's parameters (in `parameters()` order), computed in numpy.

    The loss is -mean over episodes of advantage * (sum of the log-probabilities of the choices that mattered)
    minus `entropy_coef` * the mean episode entropy. Heads that did not matter are left out: topic, framing and
    pressure when the tool was end, the confidence when the report claimed nothing. An episode's entropy is its
    mean per-turn entropy of the heads that mattered plus its claim head's entropy. The forward pass is the
    rollout's own (`Rollout.activations`) while the policy is unchanged since; the backward pass through the
    two hidden layers is written out (on these small matrices autograd's per-operation overhead costs more than
    the arithmetic), on activations laid out features x rows.
    """
    w0, _, w1, _, w2, _ = policy.weight_views()
    act = _activations(policy, rollout)
    n = rollout.final_obs.shape[0]
    episode = rollout.turn_episode
    actions = rollout.turn_actions.T
    adv = (advantages / n).astype(np.float32)
    turn_adv = adv[episode]
    counts = np.maximum(np.bincount(episode, minlength=n), 1).astype(np.float32)
    turn_explore = np.float32(entropy_coef / n) / counts[episode]
    mattered = np.ones((len(policy.action_sizes), episode.size), dtype=np.float32)
    mattered[1:] = actions[TOOL] != END
    loss_turns, d_turns = _heads_gradient(
        act.logits, policy.action_sizes, actions, mattered * turn_adv, mattered * turn_explore
    )
    claimed = (rollout.report[:, CLAIM] != NO_CLAIM).astype(np.float32)
    report_weight = np.stack([adv, adv * claimed])
    report_explore = np.zeros((2, n), dtype=np.float32)
    report_explore[0] = entropy_coef / n
    loss_report, d_report = _heads_gradient(
        act.logits_report, policy.report_sizes, rollout.report.T, report_weight, report_explore
    )
    split = policy.n_action_logits
    t = torch.from_numpy
    w1_t, w2_t = t(w1), t(w2)
    d_turns_t, d_report_t, h1, h2, h1r, h2r = map(t, (d_turns, d_report, act.h1, act.h2, act.h1_report, act.h2_report))
    d2 = _relu_backward(w2_t[:split].T @ d_turns_t, h2)
    d2r = _relu_backward(w2_t[split:].T @ d_report_t, h2r)
    d1 = _relu_backward(w1_t.T @ d2, h1)
    d1r = _relu_backward(w1_t.T @ d2r, h1r)
    x, xr = t(rollout.turn_obs), t(rollout.final_obs)
    grads = [
        d1 @ x + d1r @ xr, d1.sum(1) + d1r.sum(1),
        d2 @ h1.T + d2r @ h1r.T, d2.sum(1) + d2r.sum(1),
        torch.cat([d_turns_t @ h2.T, d_report_t @ h2r.T]), torch.cat([d_turns_t.sum(1), d_report_t.sum(1)]),
    ]  # fmt: skip
    return loss_turns + loss_report, [g.numpy() for g in grads]


def _relu_backward(grad: torch.Tensor, activation: torch.Tensor) -> torch.Tensor:
    """The gradient through a ReLU, given its output: one fused pass (no mask array)."""
    return torch.ops.aten.threshold_backward(grad, activation, 0.0)


class ReferenceCache:
    """Pairwise score and record key of one reference episode per context, from a policy snapshot refreshed
    every N steps."""

    def __init__(self, world: World, n_contexts: int, refresh_every: int, params: JudgeParams) -> None:
        self.world = world
        self.refresh_every = refresh_every
        self.params = params
        self.q = np.full(n_contexts, np.nan)
        self.key = np.zeros(n_contexts, dtype=np.uint64)
        self.snapshot: MLPPolicy | None = None
        self.refreshes = 0

    def missing(
        self, policy: MLPPolicy, step: int, batch: EpisodeBatch
    ) -> tuple[NDArray[np.int64], EpisodeBatch, MLPPolicy]:
        """Refresh the snapshot when due; the batch's contexts without a reference yet, a batch of one episode of
        each, and the snapshot to simulate it with (`fill` stores what it gave)."""
        if self.snapshot is None or step % self.refresh_every == 0:
            self.snapshot = copy.deepcopy(policy)
            self.q[:] = np.nan
            self.refreshes += 1
        need, first = np.unique(batch.context(self.world), return_index=True)
        missing = np.isnan(self.q[need])
        return need[missing], batch.select(first[missing]), self.snapshot

    def fill(self, need: NDArray[np.int64], reference: Rollout) -> None:
        """Store the pairwise score and record key of the reference episodes of contexts `need`."""
        self.q[need] = pairwise_quality(reference.observed, self.params)
        self.key[need] = reference.observed.key()

    def scores(self, batch: EpisodeBatch) -> tuple[NDArray[np.float64], NDArray[np.uint64]]:
        """Reference score and key per episode of the batch (its contexts filled)."""
        ctx = batch.context(self.world)
        return self.q[ctx], self.key[ctx]


def compute_rewards(
    cfg: TrainConfig,
    rollout: Rollout,
    params: JudgeParams,
    reference: tuple[NDArray[np.float64], NDArray[np.uint64]] | None,
) -> NDArray[np.float64]:
    inputs = RewardInputs(rollout.observed, params, cfg.group_size, cfg.binary_strict, reference)
    return design_rewards(cfg.design, inputs)


def _stats(step: int, rollout: Rollout, rewards: NDArray[np.float64]) -> StepStats:
    """The monitors, read straight off the record (cheaper than its full ground truth, same values)."""
    o = rollout.observed
    planted, claimed = o.planted, o.claim >= 0
    correct = claimed & o.trigger[np.arange(len(o)), np.maximum(o.claim, 0)]
    mean = lambda x, m: float(x[m].mean()) if m.any() else float("nan")
    return StepStats(
        step=step,
        reward=float(rewards.mean()),
        reward_planted=mean(rewards, planted),
        false_positive_rate=mean(claimed, ~planted),
        claim_rate=float(claimed.mean()),
        correct_rate=mean(correct, planted),
        accusations=float((o.sent & (o.pressure == ACCUSE)).sum(axis=1).mean()),
        confessions=float((o.sent & (o.reply == CONFESSION)).sum(axis=1).mean()),
        eval_aware=float((o.sent & o.remark).sum(axis=1).mean()),
        turns=float(o.sent.sum(axis=1).mean()),
    )


def train(
    world: World,
    cfg: TrainConfig,
    params: JudgeParams | None = None,
    on_step: Callable[[StepStats], None] | None = None,
    base: MLPPolicy | None = None,
) -> TrainResult:
    """Train one auditor from `base` (built from `cfg.init` when not given); deterministic for a given config
    and base (its numpy generator seeded from `cfg.seed`)."""
    step_hook = None if on_step is None else lambda _run, stats: on_step(stats)
    return train_many(world, [cfg], params, step_hook, [base])[0]


@dataclass
class _Run:
    """One training run's own state while it steps in lockstep with others."""

    cfg: TrainConfig
    families: list[int]
    rng: np.random.Generator
    policy: MLPPolicy
    opt: Adam
    reference: ReferenceCache | None
    result: TrainResult


def _start(world: World, cfg: TrainConfig, params: JudgeParams, base: MLPPolicy | None) -> _Run:
    fams = [world.families.index(n) for n in cfg.families]
    if base is None:
        base = build_base(world, cfg.init, cfg.hidden, cfg.seed, fams)
    rng = np.random.default_rng(cfg.seed)
    policy = copy.deepcopy(base)
    policy.name = cfg.design
    reference = None
    if design_spec(cfg.design).references:
        probe = training_batch(world, rng, 1, cfg.group_size, 0.0, fams, cfg.max_turns)
        reference = ReferenceCache(world, probe.n_contexts(world), cfg.reference_refresh_steps, params)
    opt = Adam(policy.weight_views(), cfg.learning_rate)
    return _Run(cfg, fams, rng, policy, opt, reference, TrainResult(policy=policy, config=cfg))


def _next_batch(world: World, run: _Run) -> EpisodeBatch:
    c = run.cfg
    return training_batch(world, run.rng, c.groups_per_step, c.group_size, c.benign_fraction, run.families, c.max_turns)


def _update(run: _Run, step: int, rollout: Rollout, params: JudgeParams) -> StepStats:
    """Rewards, advantages and one policy update of a run from its step's rollout (its references filled)."""
    cfg = run.cfg
    ref = None if run.reference is None else run.reference.scores(rollout.batch)
    rewards = compute_rewards(cfg, rollout, params, ref)
    adv = group_advantages(rewards.reshape(cfg.groups_per_step, cfg.group_size)).ravel()
    loss, grads = policy_gradient(run.policy, rollout, adv, cfg.entropy_coef)
    run.opt.step(grads, cfg.max_grad_norm)
    if not (math.isfinite(loss) and all(np.isfinite(w).all() for w in run.policy.weight_views())):
        check_finite(step, loss, run.policy.named_parameters())  # names what diverged
    run.result.episodes += rollout.batch.size
    stats = _stats(step, rollout, rewards)
    run.result.history.append(stats)
    return stats


def _simulate_references(world: World, step: int, runs: Sequence[_Run], rollouts: Sequence[Rollout]) -> None:
    """Simulate the reference episodes the runs' step batches still lack, every run's together (`simulate_many`):
    each from its run's snapshot and with its generator, right after its rollout, so each run's draws are those it
    would make alone."""
    lanes = []
    for run, rollout in zip(runs, rollouts, strict=True):
        if run.reference is not None:
            need, todo, snapshot = run.reference.missing(run.policy, step, rollout.batch)
            if need.size:
                lanes.append((run, run.reference, need, todo, snapshot))
    if lanes:
        lane_runs, caches, needs, todos, snapshots = zip(*lanes, strict=True)
        references = simulate_many(world, list(todos), list(snapshots), [run.rng for run in lane_runs])
        for run, cache, need, reference in zip(lane_runs, caches, needs, references, strict=True):
            cache.fill(need, reference)
            run.result.episodes += int(need.size)


def train_many(
    world: World,
    cfgs: Sequence[TrainConfig],
    params: JudgeParams | None = None,
    on_step: Callable[[int, StepStats], None] | None = None,
    bases: Sequence[MLPPolicy | None] | None = None,
) -> list[TrainResult]:
    """Train several auditors in lockstep, each as `train` would alone (the same result, bit for bit).

    Every step simulates all the runs' batches in one rollout (`simulate_many`), so the per-turn work of the
    simulation is shared across runs, which is most of a step's cost at a few hundred episodes per run; each
    run keeps its own generator, batches, rewards and update (the reference episodes that designs with
    references lack are simulated together too). The runs need one turn budget (`max_turns`);
    a run with fewer steps leaves the lockstep when it is done. `on_step` receives the run's index and its
    step's monitors. Each result's time is the lockstep's, shared out by the episodes each run simulated. The
    updates run on one torch thread, so a run does not depend on the machine's cores.
    """
    params = params or JudgeParams()
    runs = [_start(world, cfg, params, base) for cfg, base in zip(cfgs, bases or [None] * len(cfgs), strict=True)]
    start, cpu_start = time.perf_counter(), time.process_time()
    with one_torch_thread():
        for step in range(max((cfg.max_steps for cfg in cfgs), default=0)):
            active = [(i, run) for i, run in enumerate(runs) if step < run.cfg.max_steps]
            batches = [_next_batch(world, run) for _, run in active]
            policies, rngs = [run.policy for _, run in active], [run.rng for _, run in active]
            rollouts = simulate_many(world, batches, policies, rngs)
            _simulate_references(world, step, [run for _, run in active], rollouts)
            for (i, run), rollout in zip(active, rollouts, strict=True):
                stats = _update(run, step, rollout, params)
                if on_step is not None:
                    on_step(i, stats)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    total = sum(run.result.episodes for run in runs) or 1
    for run in runs:
        run.result.seconds = seconds * run.result.episodes / total
        run.result.cpu_seconds = cpu_seconds * run.result.episodes / total
    return [run.result for run in runs]
