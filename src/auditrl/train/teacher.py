"""A teacher's audits as the exact token sequences a GRPO rollout of the student would produce.

The teacher (any model string: `scripted/teacher` offline, an API auditor on a real machine) plays the
auditor's turns inside the same rollout loop GRPO uses (`auditrl.train.rollout.run_rollouts`): same
episodes, same chat template, same prompt set, and the scaffold's begun words of each turn in context
with mask 0. Each turn's text is tokenized by the student's tokenizer and cut where a rollout would
cut it: at the turn's budget, `max_new_tokens` or the report's `max_report_tokens` (no end-of-turn token
then), otherwise closed by the end-of-turn token the student must learn to emit. What a student is
fine-tuned on is therefore a sequence its own rollouts can produce, token for token, and its environment
tokens are the ones GRPO masks.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from inspect_ai.model import ChatMessageAssistant, GenerateConfig, Model

from auditrl.behaviors.schema import Behavior, Seed
from auditrl.models.limits import CallLimits
from auditrl.models.prefill import continue_body, prefill_support
from auditrl.models.retries import ModelCallFailed, call_model
from auditrl.models.roles import resolve_model
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import TEACHER, TEACHER_TURNS_CUT
from auditrl.train.config import GRPOLMConfig
from auditrl.train.episodes import AuditEpisodeFactory
from auditrl.train.generation import Sample, TurnConstraint
from auditrl.train.rollout import ChatSegments, Episode, EpisodeRow, RolloutBatch, run_rollouts

T = TypeVar("T")


class _LoopThread:
    """An event loop of its own for the teacher's calls, since the rollout loop calls its generator synchronously."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


@dataclass
class TeacherTurns:
    """A TurnGenerator whose turns the teacher model writes; `factory` records the episodes it answers for."""

    teacher: Model
    spec: str
    episodes: AuditEpisodeFactory
    segments: ChatSegments
    max_new_tokens: int
    attempts: int = 3
    limits: CallLimits = field(default_factory=CallLimits)
    max_report_tokens: int | None = None
    live: list[Episode] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)
    loop: _LoopThread = field(default_factory=_LoopThread)

    def factory(self, row: EpisodeRow) -> Episode:
        """Build the row's episode, keeping it by rollout index (rows are numbered from 0 in each batch)."""
        episode = self.episodes(row)
        if episode.opening is not None and prefill_support(self.spec) != "continue":
            raise ValueError(
                f"teacher {self.spec!r} cannot continue a begun reply, which the prompt set "
                f"'{self.episodes.settings.auditor_prompt}' needs; use a teacher that does (anthropic/, vllm/, "
                "scripted/)"
            )
        self.live.append(episode)
        return episode

    def start(self) -> None:
        self.live = []
        self.failed = {}

    def __call__(
        self, keys: list[int], contexts: list[list[int]], constraint: TurnConstraint | None = None
    ) -> list[Sample]:
        if constraint is not None:
            raise ValueError("a teacher model's turns cannot take an extension's sampling constraint")
        texts = self.loop.run(self._turns(keys))
        return [self._sample(key, text) for key, text in zip(keys, texts, strict=True)]

    async def _turns(self, keys: list[int]) -> list[str]:
        return list(await asyncio.gather(*(self._turn(key) for key in keys)))

    async def _turn(self, key: int) -> str:
        """The teacher's continuation of the episode's begun turn (its whole turn when nothing is begun)."""
        episode = self.live[key]
        messages, config = episode.auditor_messages(), self.limits.generate_config(max_tokens=self._budget(key))
        opening = episode.opening
        if opening is not None:
            messages.append(ChatMessageAssistant(content=opening))
            if body := continue_body(self.spec):
                config = config.merge(GenerateConfig(extra_body=body))
        try:
            output = await call_model(self.teacher, messages, config=config, attempts=self.attempts, role="teacher")
        except ModelCallFailed as exc:
            self.failed[key] = str(exc)
            return ""
        text = output.message.text
        if opening and text.startswith(opening):
            text = text[len(opening) :]
        return text

    def _budget(self, key: int) -> int:
        """The turn's token budget: the report's when the episode is at its report."""
        if self.max_report_tokens is not None and self.live[key].phase == "report":
            return self.max_report_tokens
        return self.max_new_tokens

    def _sample(self, key: int, text: str) -> Sample:
        ids, budget = self.segments.encode(text), self._budget(key)
        if len(ids) >= budget:
            transcript = self.live[key].transcript
            TEACHER_TURNS_CUT.set(transcript, (TEACHER_TURNS_CUT.get(transcript) or 0) + 1)
            ids = ids[:budget]
        else:
            ids = ids + sorted(self.segments.eos_ids)[:1]
        return Sample(ids, [0.0] * len(ids))

    def mark_failures(self, transcripts: Sequence[Transcript]) -> None:
        """Mark the audits whose teacher call failed as errors (transcripts in rollout-index order)."""
        for key, message in self.failed.items():
            transcripts[key].status = "error"
            transcripts[key].error = f"teacher call failed: {message}"

    def close(self) -> None:
        self.loop.close()


def teacher_rollouts(
    cfg: GRPOLMConfig,
    teacher: str,
    segments: ChatSegments,
    behaviors: dict[str, Behavior],
    seeds: Sequence[Seed],
    rows: Sequence[EpisodeRow],
    *,
    attempts: int = 3,
    limits: CallLimits | None = None,
) -> RolloutBatch:
    """One teacher audit per row, as rollout token sequences; a teacher call that failed marks its transcript an
    error."""
    factory = AuditEpisodeFactory(cfg.episodes, behaviors, seeds, teacher)
    turns = TeacherTurns(
        resolve_model(teacher),
        teacher,
        factory,
        segments,
        cfg.episodes.max_new_tokens,
        attempts,
        limits or CallLimits(),
        cfg.episodes.max_report_tokens,
    )
    try:
        batch = asyncio.run(
            run_rollouts(
                rows,
                turns.factory,
                turns,
                segments,
                group_size=1,
                first_index=0,
                max_completion_tokens=cfg.episodes.max_completion_tokens,
                auditor_name=teacher,
            )
        )
    finally:
        turns.close()
    for transcript in batch.transcripts:
        TEACHER.set(transcript, teacher)
    turns.mark_failures(batch.transcripts)
    return batch
