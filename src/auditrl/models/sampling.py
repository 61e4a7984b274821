"""Token sampling for `generate` without `torch.multinomial`, which is slow on a CPU over a large vocabulary.

`torch.multinomial` draws one exponential variate per vocabulary entry for every sampled token: over SmolLM2's
49,152 tokens that costs about a millisecond per row on a CPU, as much as a small model's forward pass. Inverse
transform sampling draws one uniform per row against the cumulative probabilities (summed in float64, so that no
token's share is lost to rounding) and samples the same distribution. `draw_by_inverse_cdf` turns a sampling
`GenerationConfig` into `generate` arguments that decode greedily over scores in which `DrawToken` left only the
drawn token: the sampling settings (temperature, top-k, top-p) act as transformers' own warpers do, in its order,
after any other logits processor. The random numbers come from torch's global generator, so `torch.manual_seed`
makes a draw repeatable as before (the draws differ from multinomial's).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from transformers import (
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

UNSUPPORTED: dict[str, tuple[float | None, ...]] = {
    "min_p": (None, 0.0), "top_h": (None,), "typical_p": (None, 1.0), "epsilon_cutoff": (None, 0.0),
    "eta_cutoff": (None, 0.0),
}  # fmt: skip
"""Sampling settings DrawToken does not apply, with the values that leave sampling unchanged (a config it draws for
holds one of them)."""


class DrawToken(LogitsProcessor):
    """Apply the sampling warpers, draw one token per row by inverse transform, and leave only it finite."""

    def __init__(self, warpers: Sequence[LogitsProcessor]) -> None:
        self.warpers = list(warpers)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        for warper in self.warpers:
            scores = warper(input_ids, scores)
        probs = torch.softmax(scores.float(), dim=-1)
        cdf = torch.cumsum(probs, dim=-1, dtype=torch.float64)
        total = cdf[:, -1:]
        if not bool(torch.isfinite(total).all()) or bool((total <= 0).any()):
            raise ValueError("the sampling distribution holds inf, nan or no probability: no token can be drawn")
        u = torch.rand(total.shape, dtype=torch.float64, device=cdf.device) * total
        drawn = torch.searchsorted(cdf, u, right=True).clamp_(max=scores.shape[-1] - 1)
        return torch.full_like(scores, float("-inf")).scatter_(-1, drawn, 0.0)  # type: ignore[return-value]


def draw_by_inverse_cdf(config: GenerationConfig, processors: Sequence[LogitsProcessor] = ()) -> dict[str, Any]:
    """`generate` keyword arguments (`generation_config`, `logits_processor`) that sample as `config` does, with
    `processors` applied first; a config that does not sample is passed on as it is. Temperature, top-k and top-p
    must be set, since what `generate` would fill in for them is not in `config`."""
    if not config.do_sample:
        return {"generation_config": config, "logits_processor": LogitsProcessorList(processors)}
    set_ = [name for name, neutral in UNSUPPORTED.items() if getattr(config, name, None) not in neutral]
    if set_:
        raise ValueError(f"inverse-CDF sampling does not apply {', '.join(set_)}; leave them unset")
    unset = [name for name in ("temperature", "top_k", "top_p") if getattr(config, name) is None]
    if unset:  # transformers would fill them from the checkpoint's generation config, else its own defaults (top-k 50)
        raise ValueError(f"inverse-CDF sampling needs {', '.join(unset)} set explicitly (top_k=0: no top-k)")
    warpers: list[LogitsProcessor] = []
    if config.temperature is not None and config.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(config.temperature))
    if config.top_k:
        warpers.append(TopKLogitsWarper(config.top_k))
    if config.top_p is not None and config.top_p < 1.0:
        warpers.append(TopPLogitsWarper(config.top_p))
    greedy = copy.deepcopy(config)
    greedy.do_sample = False
    for name in ("temperature", "top_k", "top_p", *UNSUPPORTED):
        setattr(greedy, name, None)
    return {"generation_config": greedy, "logits_processor": LogitsProcessorList([*processors, DrawToken(warpers)])}
