"""Auditor turns sampled by the policy itself with transformers' `generate` (CPU or GPU without vLLM)."""

from __future__ import annotations

import torch
from transformers import GenerationConfig
from trl import GRPOTrainer
from trl.distributed import DistributedBackend
from trl.models import unwrap_model_for_generation

from auditrl.train.config import EpisodeSettings
from auditrl.train.generation import Sample, TurnCache, generate_turn
from auditrl.train.rollout import ChatSegments


class HFTurnGenerator:
    """Per-turn batched sampling with the policy itself (left-padded `generate`), logprobs from its logits."""

    def __init__(self, trainer: GRPOTrainer, settings: EpisodeSettings, segments: ChatSegments) -> None:
        self.trainer = trainer
        self.segments = segments
        tok = segments.tokenizer
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        self.config = turn_generation_config(settings, self.pad_id, segments.eos_ids)
        self.cache = TurnCache() if settings.kv_cache else None

    def start(self) -> None:
        if self.cache is not None:
            self.cache.clear()

    def __call__(self, keys: list[int], contexts: list[list[int]]) -> list[Sample]:
        trainer = self.trainer
        with (
            unwrap_model_for_generation(
                trainer.model_wrapped,
                trainer.accelerator,
                gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
                gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
            ) as model,
            torch.no_grad(),
            DistributedBackend(trainer.accelerator).summon_full_params(trainer.model_wrapped, recurse=False),
        ):
            if not contexts:
                return []
            if self.cache is None:
                return generate_turn(model, contexts, self.config, self.pad_id, self.segments.eos_ids)
            return self.cache.generate(model, keys, contexts, self.config, self.pad_id, self.segments.eos_ids)


def turn_generation_config(settings: EpisodeSettings, pad_id: int, eos_ids: set[int]) -> GenerationConfig:
    """Sampling settings of one auditor turn (plain temperature/top-p sampling, raw logits kept)."""
    return GenerationConfig(
        do_sample=True,
        temperature=settings.temperature,
        top_p=settings.top_p,
        top_k=0,
        max_new_tokens=settings.max_new_tokens,
        pad_token_id=pad_id,
        eos_token_id=sorted(eos_ids),
        output_logits=True,
        return_dict_in_generate=True,
    )

