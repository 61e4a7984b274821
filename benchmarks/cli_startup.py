"""How fast the command line answers (goal: `auditrl --help`, `auditrl behaviors list` and a usage error under 1 s).

Runs each command in a fresh interpreter several times and reports the median wall time and the median CPU time of the
child (user + system). A usage error (a misspelt option of a heavy command, an unknown command) must answer before the
command's heavy imports (inspect-ai, scipy, torch) happen. On a shared machine the wall time includes waiting for a
core; the CPU time is what the command itself costs. `inspect --help` is timed beside them for scale.

    python benchmarks/cli_startup.py --repeats 7
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

import typer
from rich.console import Console
from rich.table import Table

CLI = [sys.executable, "-m", "auditrl.cli"]
COMMANDS: dict[str, tuple[list[str], int]] = {
    "auditrl --help": ([*CLI, "--help"], 0),
    "auditrl behaviors list": ([*CLI, "behaviors", "list"], 0),
    "auditrl audit --help": ([*CLI, "audit", "--help"], 0),
    "auditrl audit --rollout 3 (usage error)": ([*CLI, "audit", "--rollout", "3"], 2),
    "auditrl evaluate R --jugde x (usage error)": ([*CLI, "evaluate", "R", "--jugde", "x"], 2),
    "auditrl judge score R --q (usage error)": ([*CLI, "judge", "score", "R", "--q"], 2),
    "auditrl audt (usage error)": ([*CLI, "audt"], 2),
}
"""The commands timed, with the exit status each must end with."""


def timed(argv: list[str], status: int = 0) -> tuple[float, float]:
    """Wall and CPU seconds of one run of `argv` (which must exit with `status`)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "120"}
    )
    if done.returncode != status:
        raise SystemExit(f"{' '.join(argv)} exited with {done.returncode}, expected {status}")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(
    repeats: int = typer.Option(7, min=1, help="Runs per command; medians are reported."),
    warm_up: bool = typer.Option(True, help="Run each command once untimed first, so the file cache is warm."),
) -> None:
    """Print median wall and CPU time per command."""
    commands = dict(COMMANDS)
    inspect = shutil.which("inspect", path=os.path.dirname(sys.executable)) or shutil.which("inspect")
    if inspect:
        commands["inspect --help (for scale)"] = ([inspect, "--help"], 0)
    table = Table(title=f"Command-line start-up, median of {repeats} runs (load average {os.getloadavg()[0]:.1f})")
    for column in ("command", "wall s", "CPU s"):
        table.add_column(column, justify="left" if column == "command" else "right")
    for name, (argv, status) in commands.items():
        if warm_up:
            timed(argv, status)  # warm the file cache
        runs = [timed(argv, status) for _ in range(repeats)]
        table.add_row(
            name, f"{statistics.median(w for w, _ in runs):.2f}", f"{statistics.median(c for _, c in runs):.2f}"
        )
    Console().print(table)


if __name__ == "__main__":
    typer.run(main)
