"""Leaving environment tokens out of the LM head changes neither the loss nor its gradient."""

from __future__ import annotations

from pathlib import Path

import torch
from train_fakes import FakeEpisode, LengthDesign, rows_for, tiny_config, tiny_policy
from trl import GRPOTrainer

from auditrl.train.grpo import build_trainer


def test_skipping_environment_tokens_keeps_loss_and_gradient(tokenizer_dir: Path, tmp_path: Path) -> None:
    rows = rows_for(steps=1, groups=2)
    trainer, _, reward = build_trainer(
        tiny_config(), tmp_path / "run", factory=lambda row: FakeEpisode(row, turns=3), design=LengthDesign(),
        rows=rows, policy=tiny_policy(tokenizer_dir),
    )  # fmt: skip
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps  # set by train() otherwise
    inputs = trainer._generate_and_score_completions([{"prompt": r.key} for r in rows for _ in range(2)])
    assert (inputs["tool_mask"] == 0).any()
    params = [p for n, p in trainer.model.named_parameters() if p.requires_grad]

    def loss_and_grads(compute: object) -> tuple[torch.Tensor, list[torch.Tensor]]:
        trainer.model.zero_grad()
        loss = compute(trainer, trainer.model, inputs)  # type: ignore[operator]
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in params]

    skipped, skipped_grads = loss_and_grads(type(trainer)._compute_loss)
    full, full_grads = loss_and_grads(GRPOTrainer._compute_loss)
    assert type(trainer) is not GRPOTrainer
    torch.testing.assert_close(skipped, full, atol=1e-6, rtol=1e-5)
    assert any(g.abs().sum() > 0 for g in full_grads)
    for a, b in zip(skipped_grads, full_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)
    reward.runner.close()
