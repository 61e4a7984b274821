"""Running a script of benchmarks/ the way its tests do: as `__main__` in the test's own process, with its command
line, so a tiny run is spared an interpreter's start and torch's import (most of its cost)."""

from __future__ import annotations

import io
import logging
import os
import runpy
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
WIDE = 250
"""The width a script's console gets (COLUMNS), so its tables are read back uncut."""


def _unfreeze_consoles(modules: set[str]) -> None:
    """A rich Console made while COLUMNS is set keeps that width for good: one made at import by a package module the
    run imported first (a CLI module's) would print the next tests at the script's width. It is given back the width
    read at each print, as it has when made with COLUMNS unset."""
    for name in (m for m in modules if m.partition(".")[0] == "auditrl" and m in sys.modules):
        for value in list(vars(sys.modules[name]).values()):
            if isinstance(value, Console) and value.width == WIDE:
                value.width = None  # type: ignore[assignment]  # rich's own "no fixed width"


def _unhook_logging(*buffers: io.StringIO) -> None:
    """A logging handler made during a run (torch's, transformers', made at their first import) writes to the stream
    the run's stderr was then, a capture buffer that would grow with every later test's log lines: it is pointed at
    this process's stderr again."""
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for handler in (h for logger in loggers for h in getattr(logger, "handlers", ())):
        if isinstance(handler, logging.StreamHandler) and any(handler.stream is b for b in buffers):
            handler.setStream(sys.stderr)


@dataclass(frozen=True)
class Done:
    """How one benchmark run ended: its exit status and what it wrote to stdout and stderr."""

    returncode: int
    stdout: str
    stderr: str


def invoke_benchmark(script: str, *args: str, cwd: Path) -> Done:
    """Run `benchmarks/<script> args` in `cwd` as `__main__` in this process (wide console, no colour, one thread),
    its output captured; its own modules (one script imports another) are found as beside it. The environment is
    restored afterwards, variables a script set itself included (a server's address, say)."""
    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    environ, imported = dict(os.environ), set(sys.modules)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {"OMP_NUM_THREADS": "1", "COLUMNS": str(WIDE), "NO_COLOR": "1"}.items():
            patch.setenv(name, value)
        patch.setattr(sys, "argv", [str(BENCHMARKS / script), *args])
        patch.syspath_prepend(str(BENCHMARKS))
        patch.chdir(cwd)
        try:
            with redirect_stdout(out), redirect_stderr(err):
                runpy.run_path(str(BENCHMARKS / script), run_name="__main__")
        except SystemExit as exit_:
            code = exit_.code
        finally:
            os.environ.clear()
            os.environ.update(environ)
            _unfreeze_consoles(set(sys.modules) - imported)
            _unhook_logging(out, err)
    returncode = 0 if code is None else code if isinstance(code, int) else 1
    return Done(returncode, out.getvalue(), err.getvalue())


def run_benchmark(script: str, *args: str, cwd: Path) -> str:
    """stdout of `benchmarks/<script> args` run in `cwd` (see invoke_benchmark); fails on a non-zero exit."""
    done = invoke_benchmark(script, *args, cwd=cwd)
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout
