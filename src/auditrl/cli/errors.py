"""One way for every command to fail: a single escaped line and an exit status, never a traceback."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

USAGE = 2
"""Exit status for bad options, specs and run paths."""
LIBRARY = 1
"""Exit status for unreadable behavior or seed files and unknown library ids."""


def fail(message: str, console: Console | None = None, code: int = USAGE) -> typer.Exit:
    """Print `message` as one error line (its markup shown literally) and return the exit to raise."""
    (console or Console()).print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code=code)
