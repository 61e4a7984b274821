"""Auditor turns sampled through TRL's vLLM backend, correct for any number of live episodes per rank.

TRL's `VLLMGeneration.generate` is a collective that assumes every rank sends the same number of
prompts: in server mode it gathers all prompts and hands rank r the slice starting at r * len(prompts);
in colocate mode with tensor parallelism it does the same inside the TP group. Multi-turn audits end at
different turns, so live episodes per rank diverge, and a rank may have none while others still play.
Every rank therefore pads its contexts to the largest count of the turn (at least one) with a one-token
filler prompt, and drops the filler completions afterwards: the slices line up, every rank joins every
call (weight syncs under ZeRO-3/FSDP are collectives too), and no completion reaches the wrong episode.
"""

from __future__ import annotations

from typing import Any, Protocol

from accelerate.utils import gather_object

from auditrl.train.generation import Sample, TurnConstraint, cut_at_eos
from auditrl.train.rollout import ChatSegments


class VLLMBackend(Protocol):
    """What this generator uses of TRL's `VLLMGeneration` (server or colocate mode)."""

    def generate(self, prompts: list[list[int]], images: Any, num_generations: int) -> tuple[Any, ...]: ...


def padded_count(count: int) -> int:
    """The number of prompts every rank sends this turn: the largest live count over ranks, at least one.

    A collective (every rank must call it, every turn)."""
    return max(1, *gather_object([count]))


class VLLMTurnGenerator:
    """Per-turn sampling through TRL's vLLM backend (colocated engine or a separate `trl vllm-serve`);
    vLLM's own prefix caching plays the part of TurnCache."""

    def __init__(self, backend: VLLMBackend, segments: ChatSegments) -> None:
        self.backend = backend
        self.segments = segments
        tok = segments.tokenizer
        filler = tok.eos_token_id if tok.eos_token_id is not None else tok.pad_token_id
        if filler is None:
            raise ValueError("the tokenizer has neither an eos nor a pad token to pad vLLM batches with")
        self.filler = [int(filler)]

    def start(self) -> None:
        return None

    def __call__(
        self, keys: list[int], contexts: list[list[int]], constraint: TurnConstraint | None = None
    ) -> list[Sample]:
        if constraint is not None:
            raise ValueError("vLLM's turns cannot take an extension's sampling constraint")
        width = padded_count(len(contexts))
        prompts = contexts + [self.filler] * (width - len(contexts))
        _, completion_ids, logprobs, _ = self.backend.generate(prompts=prompts, images=None, num_generations=1)
        if len(completion_ids) != width:
            raise RuntimeError(f"vLLM returned {len(completion_ids)} completions for {width} prompts")
        if logprobs is None:
            raise RuntimeError(
                "vLLM returned no logprobs; the importance-sampling correction and the loss need the sampled "
                "tokens' logprobs (TRL requests them unless vllm logprobs are disabled)"
            )
        return [
            cut_at_eos(list(ids), [lp[0] if lp else None for lp in lps], self.segments.eos_ids)
            for ids, lps in zip(completion_ids[: len(contexts)], logprobs[: len(contexts)], strict=True)
        ]
