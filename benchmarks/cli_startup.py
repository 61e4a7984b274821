"""How fast the command line answers (goal: `auditrl --help` and `auditrl behaviors list` under 1 s).

Runs each command in a fresh interpreter several times and reports the median wall time and the
median CPU time of the child (user + system). On a shared machine the wall time includes waiting for a
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

COMMANDS: dict[str, list[str]] = {
    "auditrl --help": [sys.executable, "-m", "auditrl.cli", "--help"],
    "auditrl behaviors list": [sys.executable, "-m", "auditrl.cli", "behaviors", "list"],
    "auditrl audit --help": [sys.executable, "-m", "auditrl.cli", "audit", "--help"],
}
"""The commands timed; `audit --help` imports inspect-ai and shows what a heavy command still costs."""


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of `argv` (which must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "120"})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(repeats: int = typer.Option(7, min=1, help="Runs per command; medians are reported.")) -> None:
    """Print median wall and CPU time per command."""
    commands = dict(COMMANDS)
    inspect = shutil.which("inspect", path=os.path.dirname(sys.executable)) or shutil.which("inspect")
    if inspect:
        commands["inspect --help (for scale)"] = [inspect, "--help"]
    table = Table(title=f"Command-line start-up, median of {repeats} runs (load average {os.getloadavg()[0]:.1f})")
    for column in ("command", "wall s", "CPU s"):
        table.add_column(column, justify="left" if column == "command" else "right")
    for name, argv in commands.items():
        timed(argv)  # warm the file cache
        runs = [timed(argv) for _ in range(repeats)]
        table.add_row(name, f"{statistics.median(w for w, _ in runs):.2f}", f"{statistics.median(c for _, c in runs):.2f}")
    Console().print(table)


if __name__ == "__main__":
    typer.run(main)
