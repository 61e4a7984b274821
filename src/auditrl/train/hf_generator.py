"""Auditor turns sampled by the policy itself with transformers' `generate` (CPU or GPU without vLLM), in training
and when an auditor's reports are evaluated as its rollouts sample them."""

from __future__ import annotations

from typing import Any

import torch
from transformers import GenerationConfig, PreTrainedModel
from trl import GRPOConfig, GRPOTrainer
from trl.distributed import DistributedBackend
from trl.models import unwrap_model_for_generation

from auditrl.train.config import EpisodeSettings
from auditrl.train.generation import Sample, TurnCache, TurnConstraint, generate_turn
from auditrl.train.rollout import ChatSegments


def grpo_args(trainer: GRPOTrainer) -> GRPOConfig:
    """The trainer's arguments as the GRPOConfig they are (TRL types `trainer.args` as plain TrainingArguments)."""
    args = trainer.args
    if not isinstance(args, GRPOConfig):
        raise TypeError(f"the GRPO trainer's args are a {type(args).__name__}, not a GRPOConfig")
    return args


class ModelTurns:
    """Per-turn batched sampling with a model in hand (left-padded `generate`), logprobs from its logits, a turn
    under an extension's constraint where one is given. `HFTurnGenerator` samples so with the trainer's policy; an
    evaluation may sample so with a loaded model."""

    def __init__(self, model: PreTrainedModel, settings: EpisodeSettings, segments: ChatSegments) -> None:
        self.segments = segments
        self.pad_id = segments.pad_id
        self.config = turn_generation_config(settings, self.pad_id, segments.eos_ids)
        check_inherited_sampling(model)
        self.cache = TurnCache() if settings.kv_cache else None

    def start(self) -> None:
        if self.cache is not None:
            self.cache.clear()

    def sample(
        self, model: PreTrainedModel, keys: list[int], contexts: list[list[int]], constraint: TurnConstraint | None
    ) -> list[Sample]:
        """One turn per context."""
        if not contexts:
            return []
        if self.cache is None:
            return generate_turn(model, contexts, self.config, self.pad_id, self.segments.eos_ids, constraint)
        return self.cache.generate(model, keys, contexts, self.config, self.pad_id, self.segments.eos_ids, constraint)


class HFTurnGenerator(ModelTurns):
    """The trainer's policy samples each turn (CPU or GPU without vLLM)."""

    def __init__(self, trainer: GRPOTrainer, settings: EpisodeSettings, segments: ChatSegments) -> None:
        super().__init__(trainer.accelerator.unwrap_model(trainer.model), settings, segments)
        self.trainer = trainer

    def __call__(
        self, keys: list[int], contexts: list[list[int]], constraint: TurnConstraint | None = None
    ) -> list[Sample]:
        trainer = self.trainer
        args = grpo_args(trainer)
        # TrainingArguments parses a JSON string given on the command line into the dict in __post_init__.
        checkpointing = args.gradient_checkpointing_kwargs
        checkpointing = checkpointing if isinstance(checkpointing, dict) else None
        with (
            unwrap_model_for_generation(
                trainer.model_wrapped,
                trainer.accelerator,
                gather_deepspeed3_params=args.ds3_gather_for_generation,
                gradient_checkpointing_kwargs=checkpointing,
            ) as model,
            torch.no_grad(),
            DistributedBackend(trainer.accelerator).summon_full_params(trainer.model_wrapped, recurse=False),
        ):
            return self.sample(model, keys, contexts, constraint)


NEUTRAL_SAMPLING: dict[str, Any] = {
    "top_k": 0,
    "min_p": 0.0,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "min_new_tokens": 0,
    "guidance_scale": 1.0,
    "renormalize_logits": False,
    "remove_invalid_values": False,
}
"""Every GenerationConfig field that would reshape the sampling distribution, set to its neutral value:
`generate` fills each field our config leaves None from the checkpoint's generation_config.json, and TRL
scores the sampled tokens with plain temperature-scaled log-probabilities."""
UNSET_ONLY = (
    "top_h", "sequence_bias", "bad_words_ids", "suppress_tokens", "begin_suppress_tokens", "forced_bos_token_id",
    "forced_eos_token_id", "exponential_decay_length_penalty", "watermarking_config",
)  # fmt: skip
"""Fields with no neutral value but None, which a checkpoint's generation config would therefore fill in."""


def turn_generation_config(settings: EpisodeSettings, pad_id: int, eos_ids: set[int]) -> GenerationConfig:
    """Sampling settings of one auditor turn: plain temperature/top-p sampling, raw logits kept, nothing inherited."""
    return GenerationConfig(
        do_sample=True,
        temperature=settings.temperature,
        top_p=settings.top_p,
        max_new_tokens=settings.longest_turn,
        pad_token_id=pad_id,
        eos_token_id=sorted(eos_ids),
        output_logits=True,
        return_dict_in_generate=True,
        **NEUTRAL_SAMPLING,
    )


def check_inherited_sampling(model: PreTrainedModel) -> None:
    """Refuse a policy whose generation config sets a field that `generate` would apply to every turn."""
    defaults = model.generation_config
    inherited = [name for name in UNSET_ONLY if getattr(defaults, name, None) is not None]
    if inherited:
        raise ValueError(
            f"the policy's generation config sets {', '.join(inherited)}, which transformers would apply to every "
            "sampled turn while TRL's loss scores plain temperature sampling; remove them from the model's "
            "generation_config.json"
        )
