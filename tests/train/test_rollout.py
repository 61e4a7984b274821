"""Per-phase turn budgets in the rollout loop: a backend samples a batch up to the longest budget, and each turn is
cut at its own (a report may run longer than a probing message)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from train_fakes import FakeEpisode, rows_for, tiny_policy

from auditrl.train.config import EpisodeSettings
from auditrl.train.generation import Sample, TurnConstraint
from auditrl.train.rollout import ChatSegments, run_rollouts


class LongTurns:
    """A generator whose every turn is ten tokens with distinct logprobs and no end-of-turn token."""

    def start(self) -> None:
        return None

    def __call__(
        self, keys: list[int], contexts: list[list[int]], constraint: TurnConstraint | None = None
    ) -> list[Sample]:
        return [Sample(list(range(300, 310)), [-0.1 * (i + 1) for i in range(10)]) for _ in keys]


def test_each_turn_is_cut_at_its_phases_budget_keeping_its_first_tokens_and_their_logprobs(tokenizer_dir: Path) -> None:
    _, tokenizer = tiny_policy(tokenizer_dir)
    segments = ChatSegments(tokenizer)
    settings = EpisodeSettings(max_new_tokens=3, max_report_tokens=7)
    assert (settings.turn_tokens("audit"), settings.turn_tokens("report"), settings.longest_turn) == (3, 7, 7)
    assert EpisodeSettings(max_new_tokens=3).report_tokens == 3  # no report budget: the turn budget
    rows = rows_for(1, 1)
    batch = asyncio.run(run_rollouts(
        rows, FakeEpisode, LongTurns(), segments, group_size=1, first_index=0, max_completion_tokens=512,
        auditor_name="policy", turn_tokens=settings.turn_tokens,
    ))  # fmt: skip
    trained = [lp for m, lp in zip(batch.env_mask[0], batch.logprobs[0], strict=True) if m]
    assert trained == pytest.approx([-0.1, -0.2, -0.3] + [-0.1 * (i + 1) for i in range(7)])
    audit, report = batch.transcripts[0].auditor_messages
    assert audit.content == tokenizer.decode(list(range(300, 303)))
    assert report.content == tokenizer.decode(list(range(300, 307)))
    uncut = asyncio.run(run_rollouts(
        rows, FakeEpisode, LongTurns(), segments, group_size=1, first_index=0, max_completion_tokens=512,
        auditor_name="policy",
    ))  # fmt: skip
    assert sum(uncut.env_mask[0]) == 20  # without budgets the backend's samples are kept whole
