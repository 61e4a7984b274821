"""Auditor turns sampled through TRL's vLLM backend."""

from __future__ import annotations

from trl import GRPOTrainer

from auditrl.train.generation import Sample, cut_at_eos
from auditrl.train.rollout import ChatSegments


class VLLMTurnGenerator:
    """Per-turn sampling through TRL's vLLM backend (colocated engine or a separate `trl vllm-serve`);
    vLLM's own prefix caching plays the part of TurnCache."""

    def __init__(self, trainer: GRPOTrainer, segments: ChatSegments) -> None:
        self.trainer = trainer
        self.segments = segments

    def start(self) -> None:
        return None

    def __call__(self, keys: list[int], contexts: list[list[int]]) -> list[Sample]:
        _, completion_ids, logprobs, _ = self.trainer.vllm_generation.generate(
            prompts=contexts, images=None, num_generations=1
        )
        return [
            cut_at_eos(list(ids), [float("nan") if lp[0] is None else lp[0] for lp in lps], self.segments.eos_ids)
            for ids, lps in zip(completion_ids, logprobs, strict=True)
        ]

