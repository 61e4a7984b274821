"""GRPO-style policy-gradient training of AuditWorld auditors, vectorised over a whole batch of groups.

Each step: a batch of groups (k rollouts per (behavior, seed, family), some groups benign), one
vectorised rollout, rewards from the chosen design, group-relative advantages (shared with the LM
trainer), and one REINFORCE update of the MLP policy on the log-probabilities of every action taken.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from numpy.typing import NDArray
from pydantic import Field

from auditrl.configfile import ConfigModel
from auditrl.rewards.registry import design_spec
from auditrl.auditworld.designs import DesignName, RewardInputs, design_rewards
from auditrl.auditworld.judges import JudgeParams, pairwise_quality
from auditrl.auditworld.base import BaseInit, ImitationInit, build_base
from auditrl.auditworld.policies import MLPPolicy, head_logsumexp, head_membership
from auditrl.auditworld.records import CONFESSION
from auditrl.auditworld.simulate import Rollout, simulate
from auditrl.auditworld.texts import ACCUSE
from auditrl.auditworld.world import CLAIM, END, NO_CLAIM, TOOL, EpisodeBatch, World, training_batch
from auditrl.train.advantages import group_advantages
from auditrl.train.finite import check_finite


class TrainSettings(ConfigModel):
    """The optimisation settings of AuditWorld training, shared by every design of a job (its `train:` section).

    Field names follow TRL's (and the grpo_lm config's): `max_steps`, `groups_per_step`, `learning_rate`,
    `max_grad_norm`, `reference_refresh_steps`.
    """

    init: BaseInit = Field(
        default_factory=lambda: ImitationInit(kind="imitation"),
        description="The base auditor training starts from (auditrl.auditworld.base): `imitation` of a scripted expert with "
        "set competence (default), `random` (an untrained policy), or a `checkpoint`. Built once per training seed.",
    )  # fmt: skip
    max_steps: int = Field(default=100, ge=1, description="Policy updates per training run.")
    groups_per_step: int = Field(default=128, ge=1, description="Groups per step; a group is k rollouts of one (behavior, seed, family).")
    group_size: int = Field(default=8, ge=2, description="Rollouts per group (k); advantages are relative within a group.")
    max_turns: int = Field(default=15, ge=1, description="Turn budget of a training audit (the paper's training budget: 15).")
    learning_rate: float = Field(default=0.003, gt=0.0, le=1.0, description="Adam learning rate of the MLP policy.")
    entropy_coef: float = Field(default=0.01, ge=0.0, le=1.0, description="Weight of the entropy bonus (keeps the policy exploring).")
    max_grad_norm: float = Field(default=1.0, gt=0.0, description="Maximum gradient norm per update.")
    hidden: int = Field(default=64, ge=4, description="Width of the policy's hidden layers (the base's too).")
    reference_refresh_steps: int = Field(default=50, ge=1, description="Designs with references: steps between refreshes of the reference snapshot (paper: 50).")


class TrainConfig(TrainSettings):
    """One training run of an AuditWorld auditor: the shared settings plus its design, targets and seed."""

    design: DesignName = Field(description="Reward design (a registered design with an AuditWorld form, auditrl.auditworld.designs).")
    benign_fraction: float = Field(default=0.0, ge=0.0, le=1.0, description="Share of each step's groups run against benign targets (calibration).")
    binary_strict: bool = Field(default=False, description="Binary design: count only evidence the target itself produced.")
    families: list[str] = Field(min_length=1, description="Target families the training groups are drawn from.")
    seed: int = Field(default=0, description="Seeds numpy and torch: a run is deterministic given its config.")


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


def policy_loss(
    policy: MLPPolicy, rollout: Rollout, advantages: NDArray[np.float64], entropy_coef: float
) -> torch.Tensor:
    """REINFORCE with group-relative advantages over every acted turn and the report.

    Only acted turns enter the forward pass. Heads that did not matter are left out: topic, framing and
    pressure when the tool was end, the confidence when the report claimed nothing. The entropy bonus is
    each episode's mean per-turn entropy of the heads that mattered plus its claim head's entropy. All heads
    are handled at once: per head, log-prob = logit - logsumexp, summed per head by an indicator matrix.
    """
    sizes = policy.head_sizes
    n_act = len(policy.action_sizes)
    n = rollout.acted.shape[0]
    episode, turn = np.nonzero(rollout.acted)
    n_turns = episode.size
    actions = rollout.actions[episode, turn]
    obs = torch.from_numpy(np.concatenate([rollout.obs[episode, turn], rollout.final_obs]))
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    chosen = np.zeros((n_turns + n, len(sizes)), dtype=np.int64)
    chosen[:n_turns, :n_act] = actions + offsets[:n_act]
    chosen[n_turns:, n_act:] = rollout.report + offsets[n_act:]
    sent = actions[:, TOOL] != END
    claimed = rollout.report[:, CLAIM] != NO_CLAIM
    used = np.zeros((n_turns + n, len(sizes)), dtype=np.float32)  # heads whose choice mattered
    used[:n_turns, 0], used[:n_turns, 1:n_act] = 1.0, sent[:, None]
    used[n_turns:, n_act], used[n_turns:, n_act + 1] = 1.0, claimed
    explored = used.copy()  # heads whose entropy is rewarded: not the confidence
    explored[n_turns:, n_act + 1] = 0.0
    counts = np.maximum(rollout.acted.sum(axis=1), 1).astype(np.float32)
    explored[:n_turns] /= counts[episode][:, None]
    member = head_membership(sizes)
    logits = policy(obs)
    lse = head_logsumexp(logits, sizes)  # (rows, heads)
    logp = logits - lse @ member.T
    row_lp = ((logits.gather(1, torch.from_numpy(chosen)) - lse) * torch.from_numpy(used)).sum(1)
    entropy_rows = ((lse - (logp.exp() * logits) @ member) * torch.from_numpy(explored)).sum(1)
    owner = torch.from_numpy(np.concatenate([episode, np.arange(n)]))
    episode_lp = torch.zeros(n).index_add(0, owner, row_lp)
    entropy = torch.zeros(n).index_add(0, owner, entropy_rows).mean()
    adv = torch.from_numpy(advantages).float()
    return -(adv * episode_lp).mean() - entropy_coef * entropy


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

    def lookup(
        self, policy: MLPPolicy, step: int, batch: EpisodeBatch, rng: np.random.Generator
    ) -> tuple[NDArray[np.float64], NDArray[np.uint64], int]:
        """Reference score and key per episode, and how many reference episodes had to be simulated."""
        if self.snapshot is None or step % self.refresh_every == 0:
            self.snapshot = copy.deepcopy(policy)
            self.q[:] = np.nan
            self.refreshes += 1
        ctx = batch.context(self.world)
        need, first = np.unique(ctx, return_index=True)
        missing = np.isnan(self.q[need])
        need, first = need[missing], first[missing]
        if need.size:
            ref = simulate(self.world, batch.select(first), self.snapshot, rng)
            self.q[need] = pairwise_quality(ref.observed, self.params)
            self.key[need] = ref.observed.key()
        return self.q[ctx], self.key[ctx], int(need.size)


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
    mean = lambda x, m: float(x[m].mean()) if m.any() else float("nan")  # noqa: E731
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
    and base (numpy and torch seeded from `cfg.seed`)."""
    params = params or JudgeParams()
    fams = [world.families.index(n) for n in cfg.families]
    if base is None:
        base = build_base(world, cfg.init, cfg.hidden, cfg.seed, fams)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    policy = copy.deepcopy(base)
    policy.name = cfg.design
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.learning_rate)
    reference = None
    if design_spec(cfg.design).references:
        probe = training_batch(world, rng, 1, cfg.group_size, 0.0, fams, cfg.max_turns)
        reference = ReferenceCache(world, probe.n_contexts(world), cfg.reference_refresh_steps, params)
    result = TrainResult(policy=policy, config=cfg)
    start, cpu_start = time.perf_counter(), time.process_time()
    for step in range(cfg.max_steps):
        batch = training_batch(world, rng, cfg.groups_per_step, cfg.group_size, cfg.benign_fraction, fams, cfg.max_turns)
        rollout = simulate(world, batch, policy, rng)
        ref = None
        if reference is not None:
            q_ref, key_ref, extra = reference.lookup(policy, step, batch, rng)
            ref = (q_ref, key_ref)
            result.episodes += extra
        rewards = compute_rewards(cfg, rollout, params, ref)
        adv = group_advantages(rewards.reshape(cfg.groups_per_step, cfg.group_size)).ravel()
        loss = policy_loss(policy, rollout, adv, cfg.entropy_coef)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
        opt.step()
        check_finite(step, loss, policy.named_parameters())
        result.episodes += batch.size
        stats = _stats(step, rollout, rewards)
        result.history.append(stats)
        if on_step is not None:
            on_step(stats)
    result.seconds = time.perf_counter() - start
    result.cpu_seconds = time.process_time() - cpu_start
    return result
