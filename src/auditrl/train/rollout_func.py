"""TRL's `rollout_func` hook: the rows of a generation batch run as multi-turn audit episodes.

With a reference snapshot (reference pairwise), each group whose first rollout is on this rank also gets
one reference rollout on the same row, played by the snapshot; it is handed to the reward under
`reference` (on the group's first rollout, None elsewhere) and never trained on.
"""

from __future__ import annotations

import time
from typing import Any

from transformers import PreTrainedTokenizerBase
from trl import GRPOTrainer

from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import REFERENCE_SNAPSHOT_STEP
from auditrl.train.config import EpisodeSettings
from auditrl.train.extensions import NO_EXTENSION, TrainingExtension
from auditrl.train.hf_generator import HFTurnGenerator, grpo_args
from auditrl.train.rollout import ChatSegments, EpisodeFactory, EpisodeRow, TurnGenerator, run_rollouts
from auditrl.train.runtime import AsyncRunner
from auditrl.train.snapshot import PolicySnapshot
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
        snapshot: PolicySnapshot | None = None,
        extension: TrainingExtension = NO_EXTENSION,
    ) -> None:
        self.factory = factory
        self.settings = settings
        self.segments = ChatSegments(tokenizer)
        self.group_size = group_size
        self.runner = runner
        self.auditor_name = auditor_name
        self.snapshot = snapshot
        self.generator: TurnGenerator | None = None
        self.extension = extension
        self.seconds = 0.0

    def bind(self, trainer: GRPOTrainer) -> TurnGenerator:
        """Choose the generation backend once the trainer exists."""
        generator: TurnGenerator
        if grpo_args(trainer).use_vllm:
            generator = VLLMTurnGenerator(trainer.vllm_generation, self.segments)
        else:
            generator = HFTurnGenerator(trainer, self.settings, self.segments)
        generator, self.factory = self.extension.generator(generator, self.factory, self.segments)
        self.generator = generator
        return generator

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
                turn_tokens=self.settings.turn_tokens,
                hooks=self.extension,
            )
        )
        self.extension.finished(batch)
        result = batch.as_trl()
        self.extension.trl_fields(batch, result)
        if self.snapshot is not None:
            result["reference"] = self._references(rows, first, trainer, generator)
        self.seconds += time.perf_counter() - started
        return result

    def _references(
        self, rows: list[EpisodeRow], first: int, trainer: GRPOTrainer, generator: TurnGenerator
    ) -> list[Transcript | None]:
        """One snapshot rollout per group starting on this rank, placed on that group's first rollout.

        Every rank runs this (with no rows when no group starts on it): generation is collective."""
        assert self.snapshot is not None
        step = trainer.state.global_step
        model = trainer.model
        if model is None:
            raise ValueError("the GRPO trainer holds no policy model to take a snapshot of")
        self.snapshot.update(model, step, save=trainer.accelerator.is_main_process)
        starts = [i for i in range(len(rows)) if (first + i) % self.group_size == 0]
        sync = trainer.vllm_generation.sync_weights if grpo_args(trainer).use_vllm else None
        with self.snapshot.swapped_in(model, sync):
            batch = self.runner.run(
                run_rollouts(
                    [rows[i] for i in starts],
                    self.factory,
                    generator,
                    self.segments,
                    group_size=1,
                    first_index=0,
                    max_completion_tokens=self.settings.max_completion_tokens,
                    auditor_name=f"{self.auditor_name}@step{self.snapshot.step}",
                    turn_tokens=self.settings.turn_tokens,
                    hooks=self.extension,
                    references=True,
                )
            )
        self.extension.finished(batch)
        references: list[Transcript | None] = [None] * len(rows)
        for i, t in zip(starts, batch.transcripts, strict=True):
            REFERENCE_SNAPSHOT_STEP.set(t, self.snapshot.step)
            references[i] = t
        return references
