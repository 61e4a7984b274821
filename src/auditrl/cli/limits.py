"""How commands apply `--max-retries`/`--timeout` (auditrl.cli.options), check models, show retries and failures.

Every command that calls a model gets its models from `ready_models`, so keys, SDKs and local weights
are checked (as `auditrl models check` does) before the first audit.

Retries print as they happen (one yellow line each, rate-limit waits included), and a command that
recorded failures ends with how many failed and why, grouped by reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rich.console import Console
from rich.markup import escape

from auditrl.cli.errors import MESSAGE_CHARS, fail
from auditrl.models.limits import CallLimits
from auditrl.safe_text import for_terminal

if TYPE_CHECKING:
    from inspect_ai.model import GenerateConfig, Model

    from auditrl.scaffold.runner import RunLog


def call_limits(max_retries: int, timeout: int) -> CallLimits:
    return CallLimits(max_retries=max_retries, timeout=timeout)


@contextmanager
def showing_retries(console: Console) -> Iterator[None]:
    """Print each model retry (and rate-limit wait) on `console` while the block runs."""
    from auditrl.models.retries import RetryNotice, retry_notices

    def show(notice: RetryNotice) -> None:
        console.print(f"[yellow]retry[/] {escape(notice.describe())}", highlight=False, soft_wrap=True)

    with retry_notices(show):
        yield


def print_failures(console: Console, what: str, reasons: Iterable[str | None]) -> int:
    """Print '<n> <what> failed' and each distinct reason with its count; returns n."""
    counts = Counter(r or "unknown reason" for r in reasons)
    total = sum(counts.values())
    if total:
        console.print(f"[bold red]{total} {escape(what)} failed:[/]", highlight=False)
        for reason, n in counts.most_common():
            console.print(f"  {n} × {escape(for_terminal(reason, MESSAGE_CHARS))}", highlight=False, soft_wrap=True)
    return total


def opened_run(
    path: Path,
    existing: Literal["resume", "append", "overwrite"],
    command: str | None = None,
    settings: Mapping[str, Any] | None = None,
) -> RunLog:
    """A command's transcripts file opened for its run (auditrl.scaffold.runner), or a one-line error before
    any model call: an output that cannot be written, another process writing it, a run of something else
    there (with the `command` and its `settings`, auditrl.rundir), or transcripts there that cannot be read.
    The run directory's lock is held until the command ends, however it ends."""
    from typer.main import get_current_context

    from auditrl.scaffold.runner import open_run

    try:
        log = open_run(path, existing, command=command, settings=settings)
    except ValueError as exc:  # OutputError and a corrupt line included
        raise fail(str(exc)) from exc
    context = get_current_context(silent=True)
    if context is not None:  # the command's context closes when the command ends, however it ends
        context.call_on_close(log.close)
    return log


def ready_models(
    roles: Mapping[str, Iterable[str]], limits: CallLimits, config: GenerateConfig | None = None
) -> dict[str, Model]:
    """The model of every spec the options in `roles` name (option -> specs), once each passed the checks of
    `auditrl models check`; the first problem is one line naming the option, and exit 2, before any audit."""
    from auditrl.models.check import ModelNotReady, ready_model

    models: dict[str, Model] = {}
    for option, specs in roles.items():
        for spec in specs:
            if spec in models:
                continue
            try:
                models[spec] = ready_model(spec, config=config, limits=limits)
            except ModelNotReady as exc:
                raise fail(f"{option} {spec}: {exc}") from exc
    return models
