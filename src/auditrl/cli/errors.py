"""One way for every command to fail: a single line on stderr and an exit status, never a traceback.

- exit 2 (`USAGE`): the command was refused before it did any work: a bad option, an input file that
  cannot be read or is invalid, an unknown id, an output that cannot be written;
- exit 1 (`FAILURE`): it ran, and something failed: audits or model calls that failed, a full disk,
  training that diverged. What was finished is on disk, and the line says where.
The line is plain text (markup in it is shown literally), cut to `MESSAGE_CHARS` with what was cut
said, with the environment's secrets redacted.
"""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

from auditrl.models.secrets import redact
from auditrl.safe_text import clip

USAGE = 2
"""Exit status of a command refused before it did any work."""
FAILURE = 1
"""Exit status of a command whose work failed (what finished is kept)."""
MESSAGE_CHARS = 1500
"""An error line is cut here: a value from a file or a server can be any size."""

_stderr = Console(stderr=True, soft_wrap=True, highlight=False)


def fail(message: str, code: int = USAGE) -> typer.Exit:
    """Print `message` as one error line on stderr and return the exit to raise (`raise fail(...)`)."""
    line = " ".join(clip(redact(message), MESSAGE_CHARS).split())
    _stderr.print(f"[bold red]error:[/] {escape(line)}")
    return typer.Exit(code=code)


def warn(message: str) -> None:
    """One warning line on stderr (a deprecated spelling, say): the command goes on."""
    _stderr.print(f"[bold yellow]warning:[/] {escape(' '.join(redact(message).split()))}")


def finish(failed: int, total: int, what: str = "audit(s)") -> None:
    """The exit-code rule every command ends with: 0 when all `total` completed, else 1 with the count.

    Usage and input errors have exited with 2 before any work (`fail`); what completed stays on disk.
    """
    if failed:
        raise fail(f"{failed} of {total} {what} failed (the reasons are listed above; what completed is kept)", FAILURE)
