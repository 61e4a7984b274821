"""Batched turn sampling: the cross-turn KV cache gives the same tokens and logprobs as recomputing, and each
turn samples with exactly the settings TRL scores (nothing inherited from the checkpoint)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from train_fakes import tiny_policy
from transformers import GenerationConfig

from auditrl.train.config import EpisodeSettings
from auditrl.train.generation import TurnCache, cut_at_eos, generate_turn
from auditrl.train.hf_generator import check_inherited_sampling, turn_generation_config


def test_cut_at_eos() -> None:
    assert cut_at_eos([5, 2, 7], [-1.0, -2.0, -3.0], {2}).ids == [5, 2]
    assert cut_at_eos([5, 6], [-1.0, -2.0], {2}).logprobs == [-1.0, -2.0]


def test_turn_cache_matches_full_recompute(tokenizer_dir: Path) -> None:
    model, tokenizer = tiny_policy(tokenizer_dir)
    model.eval()
    pad = tokenizer.pad_token_id
    config = GenerationConfig(
        do_sample=False,
        max_new_tokens=6,
        pad_token_id=pad,
        eos_token_id=[-1],
        output_logits=True,
        return_dict_in_generate=True,
    )
    prompt = list(range(300, 340))
    # rows 0 and 1 share a prompt (a group); row 2 has its own, shorter one
    contexts = {0: list(prompt), 1: list(prompt), 2: list(range(500, 517))}
    cache = TurnCache()
    with torch.no_grad():
        for turn in range(3):
            keys = sorted(contexts)
            batch = [contexts[k] for k in keys]
            cached = cache.generate(model, keys, batch, config, pad, {-1})
            full = generate_turn(model, batch, config, pad, {-1})
            for c, f in zip(cached, full, strict=True):
                assert c.ids == f.ids
                torch.testing.assert_close(torch.tensor(c.logprobs), torch.tensor(f.logprobs), atol=1e-4, rtol=1e-4)
            for k, sample in zip(keys, cached, strict=True):
                env = [400 + turn + k] * (3 + k)  # environment tokens of different lengths per row
                contexts[k] = contexts[k] + sample.ids + env
            if turn == 1:
                del contexts[1]  # an episode that finished early leaves the batch


def test_turn_sampling_ignores_the_checkpoints_generation_config(tokenizer_dir: Path) -> None:
    """transformers fills unset sampling fields from the model's generation config; none may reach a turn."""
    model, tokenizer = tiny_policy(tokenizer_dir)
    model.eval()
    model.generation_config.update(
        repetition_penalty=1.5, min_p=0.3, top_k=5, typical_p=0.5, no_repeat_ngram_size=1, min_new_tokens=4
    )
    settings = EpisodeSettings(temperature=0.7, max_new_tokens=6)
    eos = tokenizer.eos_token_id
    config = turn_generation_config(settings, tokenizer.pad_token_id, {eos})
    config.output_scores = True
    ids = torch.tensor([[300, 301, 302, 300, 301, 302]])
    torch.manual_seed(0)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config)
    assert len(out.scores) == len(out.logits) > 0
    for scores, logits in zip(out.scores, out.logits, strict=True):
        torch.testing.assert_close(scores, logits / 0.7)  # temperature only: no penalty, no filter, eos allowed
    check_inherited_sampling(model)
    model.generation_config.suppress_tokens = [eos]
    with pytest.raises(ValueError, match="suppress_tokens"):
        check_inherited_sampling(model)
