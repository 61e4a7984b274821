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


def test_every_log_probability_pass_skips_environment_tokens(tokenizer_dir: Path, tmp_path: Path) -> None:
    """Two updates per batch make TRL compute old log-probabilities over the generation batch, and beta > 0 the
    reference's: those passes must label exactly the positions the loss pass does, or the policy ratio at an
    environment token is exp(0 - old logprob)."""
    rows = rows_for(steps=1, groups=2)
    trainer, _, reward = build_trainer(
        tiny_config(num_iterations=2, beta=0.1), tmp_path / "run", factory=lambda row: FakeEpisode(row, turns=3),
        design=LengthDesign(), rows=rows, policy=tiny_policy(tokenizer_dir),
    )  # fmt: skip
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
    passes: list[torch.Tensor] = []

    def record(module: object, args: tuple, kwargs: dict) -> None:
        if kwargs.get("fused_lm_head"):
            passes.append(kwargs["labels"].detach().clone())

    # on the causal LM inside peft's wrappers, so it sees the labels after the trainer's hook has set them
    handle = trainer.model.get_base_model().register_forward_pre_hook(record, with_kwargs=True)
    try:
        inputs = trainer._generate_and_score_completions([{"prompt": r.key} for r in rows for _ in range(2)])
        generation_passes = len(passes)
        trainer._compute_loss(trainer.model, inputs)
    finally:
        handle.remove()
    assert inputs["old_per_token_logps"] is not None and inputs["ref_per_token_logps"] is not None
    assert generation_passes >= 2 and len(passes) > generation_passes  # old + reference, then the loss
    width = inputs["completion_ids"].shape[1]
    environment = (inputs["tool_mask"] == 0) & (inputs["completion_mask"] == 1)
    assert environment.any()
    generation = torch.cat([labels[:, -width:] != -100 for labels in passes[:generation_passes]])
    rows = environment.shape[0]
    assert generation.shape[0] == 2 * rows  # old and reference passes over the whole batch, in chunks
    assert not (generation & environment.repeat(2, 1)).any()
    loss = torch.cat([labels[:, -width:] != -100 for labels in passes[generation_passes:]])
    assert loss.shape[0] == rows and not (loss & environment).any()
    assert (inputs["old_per_token_logps"][environment] == 0).all()
    reward.runner.close()
