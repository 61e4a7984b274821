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
from auditrl.sim.designs import DesignName, RewardInputs, design_rewards
from auditrl.sim.judges import JudgeParams, pairwise_quality
from auditrl.sim.policies import HEAD_SIZES, MLPPolicy
from auditrl.sim.simulate import Rollout, simulate
from auditrl.sim.world import CLAIM, END, NO_CLAIM, TOOL, EpisodeBatch, World, training_batch
from auditrl.train.advantages import group_advantages
from auditrl.train.finite import check_finite


class TrainSettings(ConfigModel):
    """The optimisation settings of AuditWorld training, shared by every design of a job (its `train:` section)."""

    steps: int = Field(default=100, ge=1, description="Policy updates per training run.")
    groups: int = Field(default=128, ge=1, description="Groups per step; a group is k rollouts of one (behavior, seed, family).")
    group_size: int = Field(default=8, ge=2, description="Rollouts per group (k); advantages are relative within a group.")
    max_turns: int = Field(default=15, ge=1, description="Turn budget of a training audit (the paper's training budget: 15).")
    lr: float = Field(default=0.01, gt=0.0, le=1.0, description="Adam learning rate of the MLP policy.")
    entropy_coef: float = Field(default=0.01, ge=0.0, le=1.0, description="Weight of the entropy bonus (keeps the policy exploring).")
    grad_clip: float = Field(default=1.0, gt=0.0, description="Maximum gradient norm per update.")
    hidden: int = Field(default=32, ge=4, description="Width of the policy's hidden layers.")
    reference_refresh: int = Field(default=50, ge=1, description="Designs with references: steps between refreshes of the reference snapshot (paper: 50).")
    prior_no_finding: float = Field(
        default=0.9, ge=0.0, lt=1.0,
        description="The untrained policy's chance of reporting no finding, standing in for an instruction-tuned "
        "base model's calibration (an assumption; the paper's base model scored 98.9 on FP calibration). It is also "
        "the first reference snapshot of reference pairwise, and is evaluated as the `untrained` row.",
    )  # fmt: skip


class TrainConfig(TrainSettings):
    """One training run of an AuditWorld auditor: the shared settings plus its design, targets and seed."""

    design: DesignName = Field(description="Reward design (a registered design with an AuditWorld form, auditrl.sim.designs).")
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


def _head_logprobs(logits: torch.Tensor, actions: torch.Tensor, sizes: tuple[int, ...]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per head: log-prob of the chosen index, and the head's entropy (heads of one size in one call)."""
    if len(set(sizes)) == 1:
        logp = torch.log_softmax(logits.reshape(*logits.shape[:-1], len(sizes), sizes[0]), dim=-1)
        lp = logp.gather(-1, actions[..., : len(sizes), None]).squeeze(-1)
        ent = -(logp.exp() * logp).sum(-1)
        return list(lp.unbind(-1)), list(ent.unbind(-1))
    lps, ents = [], []
    for h, part in enumerate(torch.split(logits, list(sizes), dim=-1)):
        logp = torch.log_softmax(part, dim=-1)
        lps.append(logp.gather(-1, actions[..., h : h + 1]).squeeze(-1))
        ents.append(-(logp.exp() * logp).sum(-1))
    return lps, ents


def policy_loss(
    policy: MLPPolicy, rollout: Rollout, advantages: NDArray[np.float64], entropy_coef: float
) -> torch.Tensor:
    """REINFORCE with group-relative advantages over every acted turn and the report.

    Only acted turns enter the forward pass. Heads that did not matter are left out: topic, framing and
    pressure when the tool was end, the confidence when the report claimed nothing.
    """
    n_act = len(HEAD_SIZES) - 2
    n = rollout.acted.shape[0]
    episode, turn = np.nonzero(rollout.acted)
    obs = torch.from_numpy(np.concatenate([rollout.obs[episode, turn], rollout.final_obs]))
    actions = torch.from_numpy(rollout.actions[episode, turn])
    logits = policy(obs)
    split = sum(HEAD_SIZES[:n_act])
    lps, ents = _head_logprobs(logits[: episode.size, :split], actions, HEAD_SIZES[:n_act])
    sent = actions[:, TOOL] != END
    turn_lp = lps[0] + (lps[1] + lps[2] + lps[3]) * sent
    turn_ent = ents[0] + (ents[1] + ents[2] + ents[3]) * sent
    report = torch.from_numpy(rollout.report)
    r_lps, r_ents = _head_logprobs(logits[episode.size :, split:], report, HEAD_SIZES[n_act:])
    claimed = report[:, CLAIM] != NO_CLAIM
    index = torch.from_numpy(episode)
    episode_lp = torch.zeros(n).index_add(0, index, turn_lp) + r_lps[0] + r_lps[1] * claimed
    counts = torch.from_numpy(np.maximum(rollout.acted.sum(axis=1), 1)).float()
    entropy = (torch.zeros(n).index_add(0, index, turn_ent) / counts + r_ents[0]).mean()
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
    f = rollout.features
    benign = ~f.planted
    mean = lambda x, m: float(x[m].mean()) if m.any() else float("nan")  # noqa: E731
    return StepStats(
        step=step,
        reward=float(rewards.mean()),
        reward_planted=mean(rewards, f.planted),
        false_positive_rate=mean(f.claim >= 0, benign),
        claim_rate=float((f.claim >= 0).mean()),
        correct_rate=mean(f.correct, f.planted),
        accusations=float(f.accusations.mean()),
        confessions=float(f.confessions.mean()),
        eval_aware=float(f.eval_aware.mean()),
        turns=float(f.turns.mean()),
    )


def train(
    world: World,
    cfg: TrainConfig,
    params: JudgeParams | None = None,
    on_step: Callable[[StepStats], None] | None = None,
) -> TrainResult:
    """Train one auditor; deterministic for a given config (numpy and torch seeded from `cfg.seed`)."""
    params = params or JudgeParams()
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    policy = MLPPolicy(hidden=cfg.hidden, seed=cfg.seed, name=cfg.design, prior_no_finding=cfg.prior_no_finding)
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr)
    fams = [world.families.index(n) for n in cfg.families]
    reference = None
    if design_spec(cfg.design).references:
        probe = training_batch(world, rng, 1, cfg.group_size, 0.0, fams, cfg.max_turns)
        reference = ReferenceCache(world, probe.n_contexts(world), cfg.reference_refresh, params)
    result = TrainResult(policy=policy, config=cfg)
    start = time.perf_counter()
    for step in range(cfg.steps):
        batch = training_batch(world, rng, cfg.groups, cfg.group_size, cfg.benign_fraction, fams, cfg.max_turns)
        rollout = simulate(world, batch, policy, rng)
        ref = None
        if reference is not None:
            q_ref, key_ref, extra = reference.lookup(policy, step, batch, rng)
            ref = (q_ref, key_ref)
            result.episodes += extra
        rewards = compute_rewards(cfg, rollout, params, ref)
        adv = group_advantages(rewards.reshape(cfg.groups, cfg.group_size)).ravel()
        loss = policy_loss(policy, rollout, adv, cfg.entropy_coef)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.grad_clip)
        opt.step()
        check_finite(step, loss, policy.named_parameters())
        result.episodes += batch.size
        stats = _stats(step, rollout, rewards)
        result.history.append(stats)
        if on_step is not None:
            on_step(stats)
    result.seconds = time.perf_counter() - start
    return result
