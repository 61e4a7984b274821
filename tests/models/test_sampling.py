"""Inverse-CDF token sampling: the distribution transformers' warpers define, drawn repeatably, inside `generate`."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from scipy.stats import chisquare
from transformers import AutoModelForCausalLM, GenerationConfig, TemperatureLogitsWarper, TopPLogitsWarper

from auditrl.models.sampling import DrawToken, draw_by_inverse_cdf

LOGITS = torch.tensor([2.0, 1.5, 1.0, 0.2, -1.0, -3.0])


def test_draws_follow_the_distribution_the_warpers_define() -> None:
    warpers = [TemperatureLogitsWarper(0.7), TopPLogitsWarper(0.9)]
    expected = LOGITS[None, :]
    for warper in warpers:
        expected = warper(torch.zeros(1, 1, dtype=torch.long), expected)
    expected_p = torch.softmax(expected, dim=-1)[0]
    assert (expected_p == 0).sum() >= 2  # top-p removed the tail
    rows = 40_000
    torch.manual_seed(0)
    scores = DrawToken(warpers)(torch.zeros(rows, 1, dtype=torch.long), LOGITS.repeat(rows, 1))  # type: ignore[arg-type]
    assert bool((torch.isfinite(scores).sum(dim=-1) == 1).all()) and float(scores.max()) == 0.0
    counts = torch.bincount(scores.argmax(dim=-1), minlength=len(LOGITS))
    assert int(counts[expected_p == 0].sum()) == 0  # a token the warpers removed is never drawn
    kept = expected_p > 0
    shares = expected_p[kept].double().numpy()
    expected_counts = shares / shares.sum() * rows
    _, p_value = chisquare(counts[kept].numpy(), expected_counts)
    assert p_value > 1e-3, (counts, expected_p * rows)


def test_a_seed_repeats_the_draws() -> None:
    draw = DrawToken([])
    inputs = torch.zeros(64, 1, dtype=torch.long)
    torch.manual_seed(3)
    first = draw(inputs, LOGITS.repeat(64, 1)).argmax(dim=-1)  # type: ignore[arg-type]
    torch.manual_seed(3)
    assert torch.equal(first, draw(inputs, LOGITS.repeat(64, 1)).argmax(dim=-1))  # type: ignore[arg-type]


def test_a_row_with_nothing_to_draw_is_refused() -> None:
    with pytest.raises(ValueError, match="no token can be drawn"):
        DrawToken([])(torch.zeros(1, 1, dtype=torch.long), torch.full((1, 6), float("-inf")))  # type: ignore[arg-type]


def test_settings_it_does_not_apply_or_leaves_to_generate_are_refused_and_greedy_passes_through() -> None:
    with pytest.raises(ValueError, match="min_p"):
        draw_by_inverse_cdf(GenerationConfig(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, min_p=0.1))
    with pytest.raises(ValueError, match="min_p"):  # 1.0 keeps only the likeliest token: not neutral for min_p
        draw_by_inverse_cdf(GenerationConfig(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, min_p=1.0))
    with pytest.raises(ValueError, match="top_k set explicitly"):  # generate would apply its default top-k of 50
        draw_by_inverse_cdf(GenerationConfig(do_sample=True, temperature=0.7, top_p=0.9))
    greedy = GenerationConfig(do_sample=False)
    assert draw_by_inverse_cdf(greedy)["generation_config"] is greedy


def test_generate_draws_inside_the_nucleus_repeatably_and_quietly(tiny_local_model: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny_local_model)
    config = GenerationConfig(
        do_sample=True, temperature=2.0, top_p=0.5, top_k=0, max_new_tokens=6, min_new_tokens=6,
        pad_token_id=0, output_logits=True, return_dict_in_generate=True,
    )  # fmt: skip
    prompt = torch.tensor([[1, 2, 3, 4]])

    def run() -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        torch.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            out = model.generate(
                input_ids=prompt, attention_mask=torch.ones_like(prompt), **draw_by_inverse_cdf(config)
            )
        return out.sequences[0, prompt.shape[1] :], out.logits

    tokens, logits = run()
    assert torch.equal(tokens, run()[0])
    nucleus = TopPLogitsWarper(0.5)
    for token, raw in zip(tokens, logits, strict=True):  # the raw logits are returned unwarped
        kept = nucleus(prompt, TemperatureLogitsWarper(2.0)(prompt, raw.clone()))  # type: ignore[arg-type]
        assert torch.isfinite(kept[0, token]), "a token outside the top-p nucleus was drawn"
        assert 1 < int(torch.isfinite(kept).sum()) < raw.shape[-1]  # the nucleus is a real choice
