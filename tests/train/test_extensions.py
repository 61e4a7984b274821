"""The trainer's extension hooks (auditrl.train.extensions): each is called where its docstring says, and what it
returns changes the run as documented (a constraint's forced tokens out of the loss, transformed rewards and
advantages, rows chosen before the first step)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from train_fakes import FakeEpisode, LengthDesign, rows_for, tiny_config, tiny_policy
from transformers import LogitsProcessor

from auditrl.analysis.monitors import read_monitors
from auditrl.configfile import ConfigFileError
from auditrl.rewards.advantages import trl_advantages
from auditrl.scaffold.transcript import Transcript
from auditrl.train.config import ExperimentSection, check_plain
from auditrl.train.extensions import NO_EXTENSION, RunSetup, Scorer, TrainingExtension
from auditrl.train.generation import Constraint, Sample
from auditrl.train.grpo import build_trainer
from auditrl.train.rollout import EpisodeRow, RolloutBatch, RolloutState

FORCED = 300


class ForceFirst(Constraint):
    """Leaves one token, FORCED, at the first sampled position of every row."""

    def __init__(self, rows: int, width: int) -> None:
        self.width = width
        self.forced = {row: set() for row in range(rows)}
        self.notes = {row: {"seen": True} for row in range(rows)}

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[1] == self.width:
            masked = torch.full_like(scores, float("-inf"))
            masked[:, FORCED] = scores[:, FORCED]
            for row in self.forced:
                self.forced[row].add(0)
            return masked
        return scores


class FirstToken:
    """The TurnConstraint of ForceFirst on `rows` rows."""

    def __init__(self, rows: int) -> None:
        self.rows = rows

    def select(self, rows: Sequence[int]) -> FirstToken | None:
        return FirstToken(len(rows)) if rows else None

    def processor(self, width: int) -> LogitsProcessor:
        return ForceFirst(self.rows, width)


class Recording(TrainingExtension):
    """Forces every turn's first token, adds 1 to every reward, doubles the advantages; records each call."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.shared: Any = None

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def start(self, rows: Sequence[EpisodeRow], setup: RunSetup) -> None:
        self._count("start")

    def constraint(self, live: Sequence[RolloutState], group_size: int, references: bool) -> FirstToken:
        self._count("constraint")
        return FirstToken(len(live))

    def sampled(self, state: RolloutState, sample: Sample, start: int) -> None:
        assert sample.notes == {"seen": True} and sample.forced == frozenset({0}) and start == len(state.completion_ids)
        state.notes.setdefault("starts", []).append(start)

    def finished(self, batch: RolloutBatch) -> None:
        assert all(len(n["starts"]) == 2 for n in batch.notes)  # two turns each
        self._count("finished")

    def trl_fields(self, batch: RolloutBatch, fields: dict[str, Any]) -> None:
        fields["starts"] = [n["starts"] for n in batch.notes]

    def adjust_rewards(
        self, step: int, transcripts: list[Transcript], rewards: list[float | None], score: Scorer
    ) -> tuple[list[float | None], Any]:
        rescored = [r for r, _ in score(transcripts)]
        assert rescored == rewards  # the scorer scores as the step did
        return [None if r is None else r + 1.0 for r in rewards], rescored

    def receive(self, shared: Any) -> None:
        self.shared = shared

    def metrics(self) -> dict[str, float]:
        return {"toy": 1.0}

    def advantages(self, scored: dict[str, Any], trainer: Any, fields: dict[str, Any]) -> torch.Tensor:
        assert len(fields["starts"]) == scored["advantages"].shape[0]
        self._count("advantages")
        return scored["advantages"] * 2.0


def test_the_trainer_calls_each_hook_and_applies_what_it_returns(tokenizer_dir: Path, tmp_path: Path) -> None:
    rows = rows_for(steps=1, groups=2)
    hooks = Recording()
    trainer, _, reward = build_trainer(
        tiny_config(), tmp_path / "run", factory=lambda row: FakeEpisode(row, turns=2), design=LengthDesign(),
        rows=rows, policy=tiny_policy(tokenizer_dir), extension=hooks,
    )  # fmt: skip
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
    inputs = trainer._generate_and_score_completions([{"prompt": r.key} for r in rows for _ in range(2)])
    reward.runner.close()
    assert hooks.calls == {"start": 1, "constraint": 2, "finished": 1, "advantages": 1}
    completions = inputs["completion_ids"]
    trained = inputs["tool_mask"].bool() & inputs["completion_mask"].bool()
    assert (completions[:, 0] == FORCED).all() and not trained[:, 0].any()  # forced: in context, out of the loss
    assert reward.last_rewards == [r + 1.0 for r in hooks.shared]  # the transformed rewards are the step's
    assert read_monitors(tmp_path / "run")[-1]["toy"] == 1.0  # the hook's metric, logged with the step's monitors
    plain = torch.tensor(
        trl_advantages(reward.last_rewards, 2, trainer.scale_rewards), dtype=inputs["advantages"].dtype
    )
    assert plain.abs().sum() > 0
    torch.testing.assert_close(inputs["advantages"], 2.0 * plain, atol=1e-3, rtol=1e-3)  # doubled by the hook


def test_a_plain_run_passes_no_extension_and_its_hooks_change_nothing() -> None:
    rewards: list[float | None] = [1.0, None]
    assert NO_EXTENSION.adjust_rewards(0, [], rewards, lambda ts: []) == (rewards, None)
    advantages = torch.ones(2)
    assert NO_EXTENSION.advantages({"advantages": advantages}, None, {}) is advantages  # type: ignore[arg-type]
    assert NO_EXTENSION.constraint([], 2, False) is None and NO_EXTENSION.metrics() == {}


def test_an_experiment_section_points_to_the_module_its_package_registers(tmp_path: Path) -> None:
    """The trainer names no experiment: the command it suggests comes from the installed entry points."""
    cfg = tiny_config()
    cfg.experiment = ExperimentSection(name="small_lm")
    with pytest.raises(ConfigFileError, match=r"run `python -m auditrl\.experiments\.small_lm train --config x\.yaml`"):
        check_plain(cfg, "x.yaml", "auditrl train")
    cfg.experiment = ExperimentSection(name="nowhere")
    with pytest.raises(ConfigFileError, match=r"no installed package registers an experiment named 'nowhere'"):
        check_plain(cfg, "x.yaml", "auditrl train")
