"""What a command shows while models run: a line per local generation, and third-party chatter kept down.

A local model on a CPU takes seconds per reply, so an audit of a few turns runs for minutes with
nothing to show. Once a command has turned reporting on (`configure`), every local generation made
inside an audit prints one line to stderr: audit k of n, turn t of T, the role, tokens and tokens
per second. The audit runners say which audit a task is (`at_audit`), the model-call loop says which
role calls (`calling`), and the local provider says what it generated (`reported`).

transformers, peft, TRL, accelerate, datasets and the Hub client print progress bars, load reports,
experimental-API notices and warnings that bury those lines (the GGUF de-quantisation bar alone is
hundreds of updates); `configure` turns them down to errors unless the user asks for them (--verbose).
Nothing here imports them.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import time
import warnings
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inspect_ai.model import ModelOutput
    from rich.console import Console
    from rich.table import Table

NOISY = ("transformers", "peft", "trl", "accelerate", "datasets", "huggingface_hub", "sentence_transformers", "torch")
"""Libraries whose loggers and warnings are turned down unless the user asks for them."""
QUIET_ENV = {
    "TRANSFORMERS_VERBOSITY": "error",
    "DATASETS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "TQDM_DISABLE": "1",  # transformers draws the GGUF de-quantisation bar with tqdm itself
    "TRL_EXPERIMENTAL_SILENCE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
"""Read by those libraries (and tqdm) when they are imported; a value the user set is kept."""
ROLES_WITH_TURNS = ("auditor", "target")


@dataclass
class AuditPosition:
    """Which audit a task runs and how many auditor calls it has made (a call past the budget is the report)."""

    audit: int
    audits: int
    max_turns: int
    turn: int = 0

    def describe(self, role: str) -> str:
        where = f"audit {self.audit}/{self.audits}"
        if role not in ROLES_WITH_TURNS:
            return where
        return f"{where} · " + (f"turn {self.turn}/{self.max_turns}" if self.turn <= self.max_turns else "report")


_position: ContextVar[AuditPosition | None] = ContextVar("auditrl_audit_position", default=None)
_role: ContextVar[str] = ContextVar("auditrl_model_role", default="model")
_console: Console | None = None


def configure(verbose: bool = False) -> None:
    """Turn on the per-generation lines (to stderr) and, unless `verbose`, turn third-party output down."""
    global _console
    from rich.console import Console

    _console = Console(stderr=True, highlight=False, soft_wrap=True)
    if not verbose:
        quiet_third_party()


def quiet_third_party() -> None:
    """Errors only from the NOISY libraries: their loggers, warnings and progress bars, imported or not yet."""
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    for name in NOISY:
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=rf"({'|'.join(NOISY)})(\.|$)")
    for bars in ("huggingface_hub.utils", "datasets.utils.tqdm"):
        if (module := sys.modules.get(bars)) is not None:
            module.disable_progress_bars()
    if (hf_logging := sys.modules.get("transformers.utils.logging")) is not None:
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    if (std := sys.modules.get("tqdm.std")) is not None:  # imported already: do what TQDM_DISABLE does at import
        std.tqdm.__init__ = functools.partialmethod(std.tqdm.__init__, disable=True)


def at_audit(audit: int, audits: int, max_turns: int) -> None:
    """Mark the running task as audit `audit` of `audits`; call it first thing in each audit's own task."""
    _position.set(AuditPosition(audit, audits, max_turns))


@contextmanager
def calling(role: str) -> Iterator[None]:
    """The model calls made in this block are `role`'s; an auditor call is the audit's next turn."""
    position = _position.get()
    if role == "auditor" and position is not None:
        position.turn += 1
    token = _role.set(role)
    try:
        yield
    finally:
        _role.reset(token)


async def reported(model: str, generation: Awaitable[ModelOutput]) -> ModelOutput:
    """Await a local generation and, inside an audit of a reporting command, print a line about it."""
    start = time.perf_counter()
    output = await generation
    position = _position.get()
    if _console is not None and position is not None and output.usage is not None:
        seconds = time.perf_counter() - start
        new = output.usage.output_tokens
        role = _role.get()
        _console.print(
            f"{position.describe(role)} · {role} local/{model}: {output.usage.input_tokens} prompt + {new} new tokens "
            f"in {seconds:.1f} s ({new / max(seconds, 1e-9):.1f} tokens/s)",
            markup=False,
        )
    return output


WHOLE_CHARS = 32
"""Cells of a kept-whole column up to this width stay on one line; longer ones fold (every character stays)."""


def keep_whole(table: Table, *headers: str) -> Table:
    """`table` with the named columns kept whole at any terminal width, so ids and names stay readable and can be
    copied into the next command: never cut or wrapped at spaces, as wide as their longest cell up to `WHOLE_CHARS`
    (a longer cell folds over lines, every character kept); the other columns wrap or shrink instead, never
    narrower than their header's longest word. Call it once the rows are added."""
    from rich.text import Text

    for column in table.columns:
        if column.header in headers:
            cells = [column.header, *column.cells]
            widths = [Text.from_markup(c).cell_len if isinstance(c, str) else Text(str(c)).cell_len for c in cells]
            column.min_width = min(max(widths), WHOLE_CHARS)
            column.overflow = "fold"
            column.no_wrap = max(widths) <= WHOLE_CHARS
        elif isinstance(column.header, str) and column.min_width is None:  # wraps, but never to nothing
            column.min_width = max((len(word) for word in column.header.split()), default=1)
    return table
