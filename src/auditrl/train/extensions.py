"""How an experiment attaches to the GRPO trainer without the trainer naming it.

The trainer calls one `TrainingExtension` at fixed points of a step; every hook's default leaves training as it
is, so a plain run passes none (`NO_EXTENSION`). An experiment subclasses it, overrides the hooks it needs and
hands an instance to `auditrl.train.grpo.train_run` (objects are passed, as TRL passes reward functions). The
experiment's own settings travel in the config's `experiment:` section, which the trainer does not read.

The hooks, in the order a step meets them:
- `training_rows` and `start`: once, before the first step (choose the rows trained on; score the starting policy);
- `generator`: once the trainer exists (wrap the turn generator and the episode factory);
- `constraint` and `sampled`: every turn of every rollout (a sampling constraint on the rows' turns; what a sampled
  turn recorded);
- `finished` and `trl_fields`: after a batch of rollouts (mark the transcripts; add fields or a loss mask);
- `adjust_rewards`, `receive` and `metrics`: in the reward function (a transform of the groups' rewards, on the
  main process; what it shares with every rank; values logged with the step's monitors);
- `advantages`: once TRL has computed the group-relative advantages (a per-token advantage transform).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from auditrl.atomic import atomic_write_text
from auditrl.behaviors.schema import Behavior, Seed
from auditrl.scaffold.transcript import Transcript
from auditrl.train.config import GRPOLMConfig
from auditrl.train.generation import Sample, TurnConstraint
from auditrl.train.rollout import ChatSegments, EpisodeFactory, EpisodeRow, RolloutBatch, RolloutState, TurnGenerator
from auditrl.train.runtime import distributed_state

if TYPE_CHECKING:
    import torch
    from accelerate import Accelerator
    from peft import PeftModel
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

Scorer = Callable[[list[Transcript]], list[tuple[float | None, dict[str, Any]]]]
"""Scores audits group by group with the run's reward design, as the step's rewards are: (reward, details) each."""


class StepTrainer(Protocol):
    """What an extension's `advantages` hook may read of the trainer (auditrl.train.trainer.AuditGRPOTrainer)."""

    num_generations: int | None
    scale_rewards: str
    accelerator: Accelerator

    def padded(self, rows: list[list[int]], value: int) -> torch.Tensor:
        """Per-position rows padded on the right as TRL pads the completions."""
        ...


@dataclass
class RunSetup:
    """What an extension may read before the first step: the run, its policy as it starts, and the behaviors and
    seeds its rows come from (loaded on first use: a run whose rows and episodes were injected may not need them)."""

    cfg: GRPOLMConfig
    run_dir: Path
    model: PreTrainedModel | PeftModel
    tokenizer: PreTrainedTokenizerBase
    load_sources: Callable[[], tuple[dict[str, Behavior], Sequence[Seed]]]

    @functools.cached_property
    def sources(self) -> tuple[dict[str, Behavior], Sequence[Seed]]:
        """The run's behaviors and training seeds."""
        return self.load_sources()

    @property
    def is_main_process(self) -> bool:
        return bool(distributed_state(self.cfg.trainer.ddp_timeout).is_main_process)

    def kept_in_run(self, name: str, compute: Callable[[], Any]) -> Any:
        """What the run's file `name` holds (JSON), or else `compute`'s result, computed on the main process and
        written there for the other processes and for a resumed run, which so reads what its first steps read."""
        path = self.run_dir / name
        state = distributed_state(self.cfg.trainer.ddp_timeout)
        if state.is_main_process and not path.is_file():
            atomic_write_text(path, json.dumps(compute(), indent=1))
        state.wait_for_everyone()
        return json.loads(path.read_text(encoding="utf-8"))


class TrainingExtension:
    """The hooks the trainer calls (see the module docstring); each default changes nothing."""

    def training_rows(self, rows: list[EpisodeRow], setup: RunSetup) -> list[EpisodeRow]:
        """The rows the run trains on, given the rows drawn from the config."""
        return rows

    def start(self, rows: Sequence[EpisodeRow], setup: RunSetup) -> None:
        """Runs once before the first step, with the rows the run trains on."""

    def generator(
        self, generator: TurnGenerator, factory: EpisodeFactory, segments: ChatSegments
    ) -> tuple[TurnGenerator, EpisodeFactory]:
        """The turn generator and episode factory the rollouts use, given the trainer's."""
        return generator, factory

    def constraint(self, live: Sequence[RolloutState], group_size: int, references: bool) -> TurnConstraint | None:
        """A sampling constraint on this turn of the live rollouts (None: all free). `references`: the rollouts
        are reference pairwise's snapshot rollouts (one per group), not trained on."""
        return None

    def sampled(self, state: RolloutState, sample: Sample, start: int) -> None:
        """A rollout's turn was sampled; its tokens begin at completion position `start`."""

    def finished(self, batch: RolloutBatch) -> None:
        """A batch of rollouts (trained or reference) ended; its transcripts are about to be scored."""

    def trl_fields(self, batch: RolloutBatch, fields: dict[str, Any]) -> None:
        """Adjust what rollout_func hands TRL (e.g. replace `env_mask`, the tokens trained on; add a field)."""

    def adjust_rewards(
        self, step: int, transcripts: list[Transcript], rewards: list[float | None], score: Scorer
    ) -> tuple[list[float | None], Any]:
        """The step's rewards of every rank's audits, transformed on the main process; the second value is shared
        with every rank (`receive`)."""
        return rewards, None

    def receive(self, shared: Any) -> None:
        """What `adjust_rewards` shared, on every rank."""

    def metrics(self) -> dict[str, float]:
        """Values logged with the step's monitors (main process, after `adjust_rewards`)."""
        return {}

    def advantages(self, scored: dict[str, Any], trainer: StepTrainer, fields: dict[str, Any]) -> torch.Tensor:
        """This rank's advantages, shaped (rows,) or (rows, completion positions), from TRL's scored generation
        batch (`scored["advantages"]`, `scored["completion_ids"]`, ...); `fields` are rollout_func's extra fields."""
        return scored["advantages"]


NO_EXTENSION = TrainingExtension()
"""A plain GRPO run."""
