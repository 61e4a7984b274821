"""The trainer trains on exactly what it sampled: the logprobs a rollout returns for the auditor's tokens
are those the trainer recomputes for the same tokens (float32, generation with the cross-turn key/value
cache, real episodes against simulated `sim/<family>` targets), and every token the environment
inserted carries mask 0."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from train_fakes import BrevityDesign, engine_config, tiny_policy

from auditrl.scaffold.prompt_sets import PROMPT_SETS, openings
from auditrl.train.grpo import build_trainer
from auditrl.train.rollout import EpisodeRow


@pytest.mark.slow
@pytest.mark.parametrize("auditor_prompt", ["compact", "guided"])
def test_rollout_logprobs_are_on_policy_and_environment_tokens_masked(
    tokenizer_dir: Path, tmp_path: Path, auditor_prompt: str
) -> None:
    """With `guided`, the words the scaffold begins each turn with are context (mask 0) and start the message."""
    cfg = engine_config(auditor_prompt)
    begun = (
        openings(PROMPT_SETS["guided"].openings or "") if auditor_prompt == "guided" else {"audit": "", "report": ""}
    )
    model, tokenizer = tiny_policy(tokenizer_dir)
    trainer, rollout, reward = build_trainer(cfg, tmp_path / "run", design=BrevityDesign(), policy=(model, tokenizer))
    rows = [EpisodeRow.model_validate_json(p) for p in trainer.train_dataset["prompt"][:2]]
    torch.manual_seed(0)
    out = rollout([r.key for r in rows for _ in range(4)], trainer)
    for prompt, completion, mask, logps, transcript in zip(
        out["prompt_ids"], out["completion_ids"], out["env_mask"], out["logprobs"], out["transcript"], strict=True
    ):
        ids = torch.tensor([prompt + completion])
        with torch.no_grad():
            recomputed, _, _ = trainer._get_per_token_logps_and_entropies(
                trainer.model, ids, torch.ones_like(ids), len(completion)
            )
        sampled = torch.tensor(mask, dtype=torch.bool)
        torch.testing.assert_close(recomputed[0][sampled], torch.tensor(logps)[sampled], atol=1e-5, rtol=1e-5)
        # the sampled spans are the auditor's own messages; everything else came from the environment
        spans: list[list[int]] = []
        for token, m, previous in zip(completion, mask, [0, *mask], strict=False):
            if m and not previous:
                spans.append([])
            if m:
                spans[-1].append(token)
        written = [m.content for m in transcript.auditor_messages if m.role == "assistant"]
        phases = ["audit"] * transcript.turns_used + ["report"] * (transcript.report is not None)
        assert [
            begun[p] + tokenizer.decode(s, skip_special_tokens=True) for p, s in zip(phases, spans, strict=True)
        ] == written
        environment = tokenizer.decode([t for t, m in zip(completion, mask, strict=True) if not m])
        assert "<tool_result" in environment and "The audit is over" in environment
    reward.runner.close()
