"""Batched auditor-turn sampling for rollouts: one left-padded `generate` call per turn for all live episodes.

Multi-turn audits re-read a long context every turn (the auditor's system prompt with the tool
protocol alone is over a thousand tokens), so on a CPU the prefill dominates and batching alone
gains little. `TurnCache` keeps each rollout's key/value cache between turns and shares the cache of
an opening prompt among the rollouts of a group, so each turn only the tokens the environment added
are prefilled. Reuse is checked token by token: a row whose context does not extend its cached
tokens is recomputed. Tokens are drawn by inverse transform (auditrl.models.sampling), not `torch.multinomial`;
sampled tokens and logprobs are exactly what `generate` drew.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from transformers import DynamicCache, GenerationConfig, LogitsProcessor, PreTrainedModel
from transformers.cache_utils import Cache, DynamicLayer

from auditrl.models.hf_cache import cache_argument, output_cache
from auditrl.models.sampling import draw_by_inverse_cdf


def _row_layers(cache: Cache | None, row: int, start: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each layer's keys and values of one batch row from position `start` on, to reuse as that row's prefix."""
    if cache is None:
        raise RuntimeError("the prefill forward returned no key/value cache to reuse")
    layers = []
    for layer in cache.layers:
        if not isinstance(layer, DynamicLayer) or layer.keys is None or layer.values is None:
            raise TypeError(f"a {type(layer).__name__} cache layer holds no per-row keys and values to reuse")
        layers.append((layer.keys[row, :, start:, :], layer.values[row, :, start:, :]))
    return layers


@dataclass
class Sample:
    """One sampled auditor turn. A logprob is None where the backend gave none (vLLM reports a NaN one as
    None): the token stays in context but is left out of the loss, since its sampling probability is unknown."""

    ids: list[int]
    logprobs: list[float | None]
    forced: frozenset[int] = field(default_factory=frozenset)
    """Positions a sampling constraint left one token for: context, not the policy's choice, so out of the loss."""
    notes: dict[str, Any] = field(default_factory=dict)
    """What the turn's constraint recorded about this row (auditrl.train.extensions), read by the extension."""

    def head(self, n: int) -> Sample:
        """The first `n` tokens (all when fewer), with their logprobs and forced positions."""
        if len(self.ids) <= n:
            return self
        return Sample(self.ids[:n], self.logprobs[:n], frozenset(p for p in self.forced if p < n), self.notes)


def sampled_logprobs(logits: torch.Tensor, ids: torch.Tensor, temperature: float) -> torch.Tensor:
    """Log-probabilities of `ids` under temperature-scaled logits, as TRL recomputes them for the loss."""
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return logp.gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def cut_at_eos(
    ids: list[int],
    logprobs: list[float | None],
    eos_ids: set[int],
    forced: frozenset[int] = frozenset(),
    notes: dict[str, Any] | None = None,
) -> Sample:
    """Keep tokens up to and including the first end-of-turn token (the rest is padding)."""
    end = next((i + 1 for i, tok in enumerate(ids) if tok in eos_ids), len(ids))
    return Sample(ids, logprobs, forced, notes or {}).head(end)


class Constraint(LogitsProcessor):
    """A sampling constraint bound to one batch: it masks scores and records, per row, the generated positions it
    left one token for (`forced`) and whatever its extension reads back (`notes`, e.g. a probability it saw)."""

    forced: dict[int, set[int]]
    notes: dict[int, dict[str, Any]]


class TurnConstraint(Protocol):
    """A constraint on one turn's rows, before it is bound to a batch: an extension's sampling constraint."""

    def select(self, rows: Sequence[int]) -> TurnConstraint | None:
        """The constraint of the given rows only (in that order), or None when it leaves them all free."""
        ...

    def processor(self, width: int) -> Constraint:
        """The constraint bound to a batch whose generation starts at `width` (prompt length, left-padded)."""
        ...


def _sampling(
    config: GenerationConfig, constraint: TurnConstraint | None, width: int
) -> tuple[dict[str, Any], Constraint | None]:
    """`generate`'s sampling arguments (auditrl.models.sampling) and the constraint bound to the batch, if any."""
    bound = constraint.processor(width) if constraint is not None else None
    return draw_by_inverse_cdf(config, [bound] if bound is not None else []), bound


def _left_pad(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r) :] = torch.tensor(r)
            mask[i, width - len(r) :] = 1
    return ids, mask


def _samples(
    out: Any, width: int, config: GenerationConfig, eos_ids: set[int], constraint: Constraint | None
) -> list[Sample]:
    new = out.sequences[:, width:]
    logps = sampled_logprobs(torch.stack(out.logits, dim=1), new, config.temperature or 1.0)
    forced = constraint.forced if constraint is not None else {}
    notes = constraint.notes if constraint is not None else {}
    return [
        cut_at_eos(n.tolist(), lp.tolist(), eos_ids, frozenset(forced.get(row, ())), notes.get(row))
        for row, (n, lp) in enumerate(zip(new.cpu(), logps.cpu(), strict=True))
    ]


def generate_turn(
    model: PreTrainedModel,
    contexts: list[list[int]],
    config: GenerationConfig,
    pad_id: int,
    eos_ids: set[int],
    constraint: TurnConstraint | None = None,
) -> list[Sample]:
    """Sample one turn for every context in a single left-padded batch, recomputing every context; `constraint`,
    where given, masks the rows' sampling (an extension's, auditrl.train.extensions)."""
    ids, mask = _left_pad(contexts, pad_id)
    device = next(model.parameters()).device
    sampling, bound = _sampling(config, constraint, ids.shape[1])
    out = model.generate(  # type: ignore[operator]  # causal LMs add GenerationMixin's generate
        input_ids=ids.to(device), attention_mask=mask.to(device), **sampling
    )
    return _samples(out, ids.shape[1], config, eos_ids, bound)


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
        """Prefill each distinct uncached context once (all but its last token) and share it among its rows; only
        the cache is read, so the pass computes one position's logits, not the prefix's x vocabulary."""
        distinct: dict[tuple[int, ...], list[int]] = {}
        for key, context in zip(keys, contexts, strict=True):
            if self._reusable(key, context) == 0 and len(context) > 1:
                distinct.setdefault(tuple(context[:-1]), []).append(key)
        if not distinct:
            return
        prefixes = [list(p) for p in distinct]
        ids, mask = (t.to(next(model.parameters()).device) for t in _left_pad(prefixes, pad_id))
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
        width = ids.shape[1]
        for row, (prefix, members) in enumerate(distinct.items()):
            start = width - len(prefix)
            layers = _row_layers(output_cache(out), row, start)
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
        constraint: TurnConstraint | None = None,
    ) -> list[Sample]:
        """Sample one turn per context, prefilling only what each row's cache does not cover yet (`constraint` as
        in generate_turn).

        Every live rollout samples every turn, so a key missing from a call has finished and its cache is
        dropped. The key/value tensors are moved layer by layer (rows into the batch cache before generating,
        the batch cache into rows after), so the live cache is held about once, not once per stage
        (`KV_CACHE_COPIES` in auditrl.train.memory)."""
        self._prime(model, keys, contexts, pad_id)
        live = set(keys)
        self.rows = {key: row for key, row in self.rows.items() if key in live}
        reuse = [self._reusable(k, c) for k, c in zip(keys, contexts, strict=True)]
        if not any(reuse):
            return generate_turn(model, contexts, config, pad_id, eos_ids, constraint)
        cached_width = max(reuse)
        prefix_ids, prefix_mask = _left_pad([c[:n] for c, n in zip(contexts, reuse, strict=True)], pad_id)
        suffix_ids, suffix_mask = _left_pad([c[n:] for c, n in zip(contexts, reuse, strict=True)], pad_id)
        if prefix_ids.shape[1] != cached_width:
            raise RuntimeError("cached prefix width mismatch")
        ids = torch.cat([prefix_ids, suffix_ids], dim=1)
        mask = torch.cat([prefix_mask, suffix_mask], dim=1)
        device = next(model.parameters()).device
        cache = self._batch_cache(model, keys, reuse, cached_width)
        sampling, bound = _sampling(config, constraint, ids.shape[1])
        out = model.generate(  # type: ignore[operator]  # causal LMs add GenerationMixin's generate
            input_ids=ids.to(device), attention_mask=mask.to(device), **cache_argument(cache), **sampling
        )
        del cache
        samples = _samples(out, ids.shape[1], config, eos_ids, bound)
        self._store(output_cache(out), keys, contexts, mask, samples)
        return samples

    def _batch_cache(self, model: PreTrainedModel, keys: list[int], reuse: list[int], width: int) -> DynamicCache:
        """The rows' caches left-padded into one batch cache; each row's tensors are released once copied."""
        template = next(iter(self.rows.values())).layers
        shapes = [(k.new_empty(0), k.shape[0], k.shape[2]) for k, _ in template]
        del template
        rows = [list(self.rows.pop(key).layers) if n else None for key, n in zip(keys, reuse, strict=True)]
        cache = DynamicCache(config=model.config)
        for index, (like, heads, dim) in enumerate(shapes):
            k = like.new_zeros((len(keys), heads, width, dim))
            v = like.new_zeros((len(keys), heads, width, dim))
            for row, (layers, n) in enumerate(zip(rows, reuse, strict=True)):
                if layers is not None:
                    k[row, :, width - n :, :], v[row, :, width - n :, :] = layers[index]
                    layers[index] = None  # type: ignore[call-overload]
            cache.update(k, v, index)
            del k, v
        return cache

    def _store(
        self, cache: Any, keys: list[int], contexts: list[list[int]], mask: torch.Tensor, samples: list[Sample]
    ) -> None:
        """Keep each row's real (unpadded) positions, layer by layer, emptying the batch cache as it goes."""
        cached = cache.layers[0].keys.shape[2]
        width = mask.shape[1]
        kept = [min(len(sample.ids), cached - width) for sample in samples]
        device = cache.layers[0].keys.device
        real = [
            torch.cat([mask[row].nonzero().squeeze(-1), torch.arange(width, width + n)]).to(device)
            for row, n in enumerate(kept)
        ]
        layers: list[list[tuple[torch.Tensor, torch.Tensor]]] = [[] for _ in keys]
        for layer in cache.layers:
            for row, index in enumerate(real):
                layers[row].append((layer.keys[row][:, index, :], layer.values[row][:, index, :]))
            layer.keys = layer.values = layer.keys.new_empty(0)
        for key, context, sample, n, row_layers in zip(keys, contexts, samples, kept, layers, strict=True):
            self.rows[key] = _RowCache(context + sample.ids[:n], row_layers)
