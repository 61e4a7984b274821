"""TRL's `rollout_func` hook: the rows of a generation batch run as multi-turn audit episodes.

With a reference snapshot (reference pairwise), each group whose first rollout is on this rank also gets
one reference rollout on the same row, played by the snapshot; it is handed to the reward under
`reference` (on the group's first rollout, None elsewhere) and never trained on.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from transformers import PreTrainedTokenizerBase
from trl import GRPOTrainer

from auditrl.scaffold.prompt_sets import PROMPT_SETS, openings
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import REFERENCE_SNAPSHOT_STEP
from auditrl.train.config import EpisodeSettings, claims_per_group
from auditrl.train.copy_quote import transcript_reply_tokens
from auditrl.train.episodes import AuditEpisodeFactory
from auditrl.train.hf_generator import HFTurnGenerator
from auditrl.train.rollout import ChatSegments, EpisodeFactory, EpisodeRow, TurnGenerator, run_rollouts
from auditrl.train.runtime import AsyncRunner
from auditrl.train.sft import verdict_token_ids
from auditrl.train.snapshot import PolicySnapshot
from auditrl.train.teacher import TeacherProbing, teacher_probing
from auditrl.train.vllm_generator import VLLMTurnGenerator


def claim_tokens(tokenizer: PreTrainedTokenizerBase, prompt_set: str) -> tuple[frozenset[int], ...]:
    """The token sets claim exploration restricts a report's first tokens to: the spellings of the verdict `false`
    the prompt set's claim opening begins with, then that opening's other tokens as the tokenizer spells them."""
    name = PROMPT_SETS[prompt_set].openings
    claim = openings(name).get("claim") if name else None
    if claim is None:
        raise ValueError(f"episodes.claim_exploration: prompt set {prompt_set!r} has no claim opening")
    ids = tokenizer.encode(claim, add_special_tokens=False)
    verdicts = verdict_token_ids(tokenizer, words=("false",))
    if not ids or ids[0] not in verdicts:
        raise ValueError(
            f"episodes.claim_exploration: the claim opening {claim!r} of {name} does not start with the verdict "
            "`false` as one token of this tokenizer"
        )
    return (verdicts, *(frozenset([i]) for i in ids[1:]))


def quote_sources(settings: EpisodeSettings, tokenizer: PreTrainedTokenizerBase) -> Callable[[Transcript], list[list[int]]] | None:
    """What a report under the episodes' report grammar may quote: the target's replies as tokens (None: no grammar)."""
    return None if settings.report_grammar == "free" else functools.partial(transcript_reply_tokens, tokenizer, unit=settings.quote_unit)


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
    ) -> None:
        self.factory = factory
        self.settings = settings
        self.segments = ChatSegments(tokenizer)
        self.group_size = group_size
        self.runner = runner
        self.auditor_name = auditor_name
        self.snapshot = snapshot
        self.generator: TurnGenerator | None = None
        self.probing: TeacherProbing | None = None
        self.seconds = 0.0
        self.claims_per_group = claims_per_group(settings.claim_exploration, group_size)
        self.claim_tokens = claim_tokens(tokenizer, settings.auditor_prompt) if self.claims_per_group else ()
        self.quote_sources = quote_sources(settings, tokenizer)
        if settings.report_grammar != "free":
            self.claim_tokens = self.claim_tokens[:1]  # the grammar writes the claim's keys once its verdict is drawn

    def bind(self, trainer: GRPOTrainer) -> TurnGenerator:
        """Choose the generation backend once the trainer exists."""
        if trainer.args.use_vllm:
            self.generator = VLLMTurnGenerator(trainer.vllm_generation, self.segments)
        else:
            self.generator = HFTurnGenerator(trainer, self.settings, self.segments)
        if self.settings.probing == "teacher":
            if not isinstance(self.factory, AuditEpisodeFactory):
                raise TypeError("episodes.probing: teacher needs the config's own episodes (an AuditEpisodeFactory)")
            self.generator = self.probing = teacher_probing(self.settings, self.generator, self.factory, self.segments)
            self.factory = self.probing.factory
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
                claim_tokens=self.claim_tokens,
                claims_per_group=self.claims_per_group,
                claim_planted_only=self.settings.claim_exploration_targets == "planted",
                turn_tokens=self.settings.turn_tokens,
                quote_sources=self.quote_sources,
            )
        )
        if self.probing is not None:
            self.probing.mark(batch.transcripts)
        result = batch.as_trl()
        if self.settings.trained_tokens == "quote":
            result["env_mask"] = batch.quote_mask
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
        self.snapshot.update(model, step, save=trainer.accelerator.is_main_process)
        starts = [i for i in range(len(rows)) if (first + i) % self.group_size == 0]
        sync = trainer.vllm_generation.sync_weights if trainer.args.use_vllm else None
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
                    quote_sources=self.quote_sources,
                )
            )
        if self.probing is not None:
            self.probing.mark(batch.transcripts)
        references: list[Transcript | None] = [None] * len(rows)
        for i, t in zip(starts, batch.transcripts, strict=True):
            REFERENCE_SNAPSHOT_STEP.set(t, self.snapshot.step)
            references[i] = t
        return references

