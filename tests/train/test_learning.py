"""A policy trained through the real path gets better: the tiny policy audits AuditWorld's simulated targets
(`sim/<family>`) with the real episode engine, rollouts, TRL's GRPO step and LoRA, rewarded for brevity.

Brevity (minus the characters the auditor wrote) varies a lot between rollouts of a random policy, so
every group has advantages from the first step, and the tiny policy can reach it in a few steps. The
tiny policy's output layer is initialised at standard deviation 1 instead of transformers' 0.02: after
the final RMSNorm the hidden state has norm about sqrt(32), so at 0.02 the logits span about 0.1 and the
next-token distribution is flat over SmolLM2's 49k tokens whatever the LoRA layers below do (TRL trains
no adapter on the LM head). At 1 the logits span several units and the adapters can move them.

The statistic: Welch's t of the per-rollout rewards of the last five steps against those of the first
five (2 groups of 8 rollouts a step, so 80 rollouts each). It must exceed 5 (two-sided p about 3e-6
under no change, at the 79 degrees of freedom left when the last steps no longer vary). A sign error in
the advantages, loss masks shifted off the sampled tokens or logprobs of the wrong tokens would leave
the reward flat or push it down. Over seeds 0-8 the policy settled on one short reply (16-32 characters
against 50-60 at the start) and Welch's t was 17.6-41.7; the test runs seed 0 (t 21.5). Groups of 4
learned too, but noisier: one trajectory in about ten went the wrong way and settled on a longer reply.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import ttest_ind
from train_fakes import BrevityDesign, engine_config, tiny_policy

from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts
from auditrl.train.grpo import train_run

STEPS = 20
WINDOW = 5
MIN_WELCH_T = 5.0
MICRO_BATCH = 16
"""A step's 16 rollouts in one forward/backward pass, not 16: the loss (dapo) is normalised over the step's tokens
either way, and seed 0's rewards were the same step by step, at about 15% less CPU time."""


def brevity_rewards_per_step(tokenizer_dir: Path, run_dir: Path, seed: int) -> list[list[float]]:
    """Train the tiny policy for STEPS steps; the rewards of each step's rollouts, step by step."""
    base = engine_config()
    cfg = base.model_copy(
        update={
            "seed": seed,
            "episodes": base.episodes.model_copy(update={"max_turns": 1, "max_new_tokens": 4, "temperature": 1.0}),
            "data": base.data.model_copy(update={"group_size": 8}),
            "trainer": base.trainer.model_copy(update={"max_steps": STEPS, "micro_batch_size": MICRO_BATCH}),
        }
    )
    model, tokenizer = tiny_policy(tokenizer_dir)
    torch.manual_seed(seed)
    with torch.no_grad():
        model.lm_head.weight.normal_(0.0, 1.0)
    train_run(cfg, run_dir, policy=(model, tokenizer), design=BrevityDesign(), progress=False)
    transcripts = read_transcripts(run_dir / TRANSCRIPTS)
    rollouts = cfg.data.group_size * cfg.data.groups_per_step
    assert len(transcripts) == STEPS * rollouts
    for t in transcripts:
        assert t.status != "error", t.error
        assert t.report is not None and t.scores["reward"] is not None
    steps: list[list[float]] = [[] for _ in range(STEPS)]
    for t in transcripts:
        steps[t.metadata["step"]].append(t.scores["reward"])
    return steps


@pytest.mark.slow
def test_tiny_policy_learns_brevity_against_sim_targets(tokenizer_dir: Path, tmp_path: Path) -> None:
    steps = brevity_rewards_per_step(tokenizer_dir, tmp_path / "run", seed=0)
    first = np.concatenate(steps[:WINDOW])
    last = np.concatenate(steps[-WINDOW:])
    welch = ttest_ind(last, first, equal_var=False).statistic
    means = [round(float(np.mean(s)), 1) for s in steps]
    assert last.mean() > first.mean() and welch > MIN_WELCH_T, f"Welch t {welch:.1f}; mean reward per step {means}"
