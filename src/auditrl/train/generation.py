"""Batched auditor-turn sampling for rollouts: one left-padded `generate` call per turn for all live episodes.

Multi-turn audits re-read a long context every turn (the auditor's system prompt with the tool
protocol alone is over a thousand tokens), so on a CPU the prefill dominates and batching alone
gains little. `TurnCache` keeps each rollout's key/value cache between turns and shares the cache of
an opening prompt among the rollouts of a group, so each turn only the tokens the environment added
are prefilled. Reuse is checked token by token: a row whose context does not extend its cached
tokens is recomputed. Sampled tokens and logprobs are exactly what `generate` drew.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache, GenerationConfig, PreTrainedModel

from auditrl.models.hf_cache import cache_argument, output_cache


@dataclass
class Sample:
    """One sampled auditor turn. A logprob is None where the backend gave none (vLLM reports a NaN one as
    None): the token stays in context but is left out of the loss, since its sampling probability is unknown."""

    ids: list[int]
    logprobs: list[float | None]


def sampled_logprobs(logits: torch.Tensor, ids: torch.Tensor, temperature: float) -> torch.Tensor:
    """Log-probabilities of `ids` under temperature-scaled logits, as TRL recomputes them for the loss."""
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return logp.gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def cut_at_eos(ids: list[int], logprobs: list[float | None], eos_ids: set[int]) -> Sample:
    """Keep tokens up to and including the first end-of-turn token (the rest is padding)."""
    for i, tok in enumerate(ids):
        if tok in eos_ids:
            return Sample(ids[: i + 1], logprobs[: i + 1])
    return Sample(ids, logprobs)


def _left_pad(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r) :] = torch.tensor(r)
            mask[i, width - len(r) :] = 1
    return ids, mask


def _samples(out: Any, width: int, config: GenerationConfig, eos_ids: set[int]) -> list[Sample]:
    new = out.sequences[:, width:]
    logps = sampled_logprobs(torch.stack(out.logits, dim=1), new, config.temperature or 1.0)
    return [cut_at_eos(n.tolist(), lp.tolist(), eos_ids) for n, lp in zip(new.cpu(), logps.cpu(), strict=True)]


def generate_turn(
    model: PreTrainedModel, contexts: list[list[int]], config: GenerationConfig, pad_id: int, eos_ids: set[int]
) -> list[Sample]:
    """Sample one turn for every context in a single left-padded batch, recomputing every context."""
    ids, mask = _left_pad(contexts, pad_id)
    device = next(model.parameters()).device
    out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), generation_config=config)
    return _samples(out, ids.shape[1], config, eos_ids)


@dataclass
class _RowCache:
    ids: list[int]
    layers: list[tuple[torch.Tensor, torch.Tensor]]  # per layer (heads, tokens, dim)


class TurnCache:
    """Per-rollout key/value caches carried across turns (see the module docstring)."""

    def __init__(self) -> None:
        self.rows: dict[int, _RowCache] = {}

    def clear(self) -> None:
        self.rows.clear()

    def _reusable(self, key: int, context: list[int]) -> int:
        row = self.rows.get(key)
        if row is None or len(row.ids) >= len(context) or context[: len(row.ids)] != row.ids:
            return 0
        return len(row.ids)

    def _prime(self, model: PreTrainedModel, keys: list[int], contexts: list[list[int]], pad_id: int) -> None:
        """Prefill each distinct uncached context once (all but its last token) and share it among its rows."""
        distinct: dict[tuple[int, ...], list[int]] = {}
        for key, context in zip(keys, contexts, strict=True):
            if self._reusable(key, context) == 0 and len(context) > 1:
                distinct.setdefault(tuple(context[:-1]), []).append(key)
        if not distinct:
            return
        prefixes = [list(p) for p in distinct]
        ids, mask = _left_pad(prefixes, pad_id)
        device = next(model.parameters()).device
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = model(
            input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device), use_cache=True
        )
        width = ids.shape[1]
        for row, (prefix, members) in enumerate(distinct.items()):
            start = width - len(prefix)
            layers = [
                (layer.keys[row, :, start:, :], layer.values[row, :, start:, :]) for layer in output_cache(out).layers
            ]
            for key in members:
                self.rows[key] = _RowCache(list(prefix), layers)

    def generate(
        self,
        model: PreTrainedModel,
        keys: list[int],
        contexts: list[list[int]],
        config: GenerationConfig,
        pad_id: int,
        eos_ids: set[int],
    ) -> list[Sample]:
        """Sample one turn per context, prefilling only what each row's cache does not cover yet."""
        self._prime(model, keys, contexts, pad_id)
        reuse = [self._reusable(k, c) for k, c in zip(keys, contexts, strict=True)]
        if not any(reuse):
            return generate_turn(model, contexts, config, pad_id, eos_ids)
        cached_width = max(reuse)
        suffixes = [c[n:] for c, n in zip(contexts, reuse, strict=True)]
        suffix_ids, suffix_mask = _left_pad(suffixes, pad_id)
        batch = len(contexts)
        device = next(model.parameters()).device
        template = next(iter(self.rows.values())).layers
        layers: list[tuple[torch.Tensor, torch.Tensor]] = []
        for index, (k0, v0) in enumerate(template):
            heads, _, dim = k0.shape
            k = k0.new_zeros((batch, heads, cached_width, dim))
            v = v0.new_zeros((batch, heads, cached_width, dim))
            for row, (key, n) in enumerate(zip(keys, reuse, strict=True)):
                if n:
                    kr, vr = self.rows[key].layers[index]
                    k[row, :, cached_width - n :, :] = kr
                    v[row, :, cached_width - n :, :] = vr
            layers.append((k, v))
        prefix_ids, prefix_mask = _left_pad([c[:n] for c, n in zip(contexts, reuse, strict=True)], pad_id)
        if prefix_ids.shape[1] != cached_width:
            raise RuntimeError("cached prefix width mismatch")
        ids = torch.cat([prefix_ids, suffix_ids], dim=1)
        mask = torch.cat([prefix_mask, suffix_mask], dim=1)
        cache = DynamicCache(ddp_cache_data=layers, config=model.config)
        out = model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            generation_config=config,
            **cache_argument(cache),
        )
        samples = _samples(out, ids.shape[1], config, eos_ids)
        self._store(output_cache(out), keys, contexts, mask, samples)
        return samples

    def _store(
        self, cache: Any, keys: list[int], contexts: list[list[int]], mask: torch.Tensor, samples: list[Sample]
    ) -> None:
        cached = cache.layers[0].keys.shape[2]
        width = mask.shape[1]
        for row, (key, context, sample) in enumerate(zip(keys, contexts, samples, strict=True)):
            kept = min(len(sample.ids), cached - width)
            real = torch.cat([mask[row].nonzero().squeeze(-1), torch.arange(width, width + kept)])
            self.rows[key] = _RowCache(
                context + sample.ids[:kept],
                [(layer.keys[row][:, real, :], layer.values[row][:, real, :]) for layer in cache.layers],
            )
