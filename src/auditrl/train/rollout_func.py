"""TRL's `rollout_func` hook: the rows of a generation batch run as multi-turn audit episodes."""

from __future__ import annotations

import time
from typing import Any

from transformers import PreTrainedTokenizerBase
from trl import GRPOTrainer

from auditrl.train.config import EpisodeSettings
from auditrl.train.hf_generator import HFTurnGenerator
from auditrl.train.rollout import ChatSegments, EpisodeFactory, EpisodeRow, TurnGenerator, run_rollouts
from auditrl.train.runtime import AsyncRunner
from auditrl.train.vllm_generator import VLLMTurnGenerator


class AuditRolloutFunc:
    """TRL rollout_func: runs this rank's slice of the generation batch as audit episodes."""

    def __init__(
        self,
        factory: EpisodeFactory,
        settings: EpisodeSettings,
        tokenizer: PreTrainedTokenizerBase,
        group_size: int,
        runner: AsyncRunner,
        auditor_name: str,
    ) -> None:
        self.factory = factory
        self.settings = settings
        self.segments = ChatSegments(tokenizer)
        self.group_size = group_size
        self.runner = runner
        self.auditor_name = auditor_name
        self.generator: TurnGenerator | None = None
        self.seconds = 0.0

    def bind(self, trainer: GRPOTrainer) -> TurnGenerator:
        """Choose the generation backend once the trainer exists."""
        if trainer.args.use_vllm:
            self.generator = VLLMTurnGenerator(trainer.vllm_generation, self.segments)
        else:
            self.generator = HFTurnGenerator(trainer, self.settings, self.segments)
        return self.generator

    def __call__(self, prompts: list[Any], trainer: GRPOTrainer) -> dict[str, Any]:
        generator = self.generator or self.bind(trainer)
        rows = [EpisodeRow.model_validate_json(p) for p in prompts]
        first = trainer.accelerator.process_index * len(prompts)
        started = time.perf_counter()
        batch = self.runner.run(
            run_rollouts(
                rows,
                self.factory,
                generator,
                self.segments,
                group_size=self.group_size,
                first_index=first,
                max_completion_tokens=self.settings.max_completion_tokens,
                auditor_name=self.auditor_name,
            )
        )
        self.seconds += time.perf_counter() - started
        return batch.as_trl()

