"""One progress bar a stage of a long command (teacher audits, scores, training steps), cleared when it ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn


@contextmanager
def stage_progress(console: Console) -> Iterator[Callable[[str, int, int], None]]:
    """Yield the `on_progress(stage, done, total)` callback the training entry points take."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        tasks: dict[str, TaskID] = {}

        def show(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = progress.add_task(stage, total=total)
            progress.update(tasks[stage], completed=done, total=total)

        yield show
