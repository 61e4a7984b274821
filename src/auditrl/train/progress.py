"""A rich progress bar over optimizer steps."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from auditrl.train.reward import GroupReward


class StepProgress(TrainerCallback):
    """A rich progress bar over optimizer steps with the latest reward (main process only)."""

    def __init__(self, reward: GroupReward, console: Console | None = None) -> None:
        self.reward = reward
        self.progress = Progress(
            TextColumn("[bold]GRPO"),
            BarColumn(),
            TextColumn("step {task.completed}/{task.total}"),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
        )
        self.task: Any = None

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        if state.is_world_process_zero:
            self.progress.start()
            self.task = self.progress.add_task("train", total=state.max_steps, completed=state.global_step, info="")
        return control

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        if self.task is not None:
            judged = [r for r in self.reward.last_rewards if r is not None]
            info = f"reward {sum(judged) / len(judged):.3f}" if judged else "reward -"
            self.progress.update(self.task, completed=state.global_step, info=info)
        return control

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        if self.task is not None:
            self.progress.stop()
        return control
