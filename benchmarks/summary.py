"""Where the project stands on speed: every benchmark's figure beside its goal, in one table (`make bench`).

Runs each script of benchmarks/ that has a goal, as a user would (a fresh interpreter, one thread), reads
its tables back, and prints one table: the figure, the goal, whether it is met, and where one exists an
anchor measured in the same run (`inspect --help` for start-up; the rollout-only rate beside training
throughput; Petri's per-turn cost only where inspect-petri is installed, which this script does not install).
The CPU (torch's capability string, e.g. AVX2 or AVX512) and the load average head the table, since
every figure depends on them. With `--tiny` each script runs at its smallest size (a check that the
table can be built, not a measurement).

    OMP_NUM_THREADS=1 python benchmarks/summary.py
    python benchmarks/summary.py --tiny --only sim_throughput,engine_overhead
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

HERE = Path(__file__).resolve().parent
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")
STRATEGIES_ARI_FLOOR = 0.991
"""The lowest per-seed bootstrap ARI of `auditrl strategies` on 81,000 transcripts before it was made faster
(the floor its stability must not fall below); set from strategies_at_scale.py's measurement."""


@dataclass(frozen=True)
class Figure:
    """One line of the summary: what was measured, its value as printed, its goal, and whether it is met."""

    benchmark: str
    measure: str
    value: str
    goal: str
    met: bool | None
    anchor: str = ""


Rows = dict[str, list[str]]


def table_rows(out: str) -> Rows:
    """The rows of every rich table in `out`: first cell -> the other cells."""
    rows: Rows = {}
    for line in out.splitlines():
        if line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            if cells[0]:
                rows[cells[0]] = cells[1:]
    return rows


def numbers(cells: list[str]) -> list[float]:
    """Every number in `cells`, in order (thousands separators and units allowed)."""
    return [float(n.replace(",", "")) for cell in cells for n in NUMBER.findall(cell)]


def _engine(rows: Rows, out: str) -> list[Figure]:
    mean = numbers(rows["mean"])[0]
    try:
        importlib.metadata.distribution("inspect-petri")
        anchor = "inspect-petri installed: its per-turn cost is not measured by this script"
    except importlib.metadata.PackageNotFoundError:
        anchor = "Petri: inspect-petri not installed"
    return [Figure("engine_overhead", "engine ms per auditor turn (mean)", f"{mean:.3f}", "< 2", mean < 2.0, anchor)]


def _sim(rows: Rows, out: str) -> list[Figure]:
    trained = {
        name.removeprefix("train: "): numbers(cells)[3] for name, cells in rows.items() if name.startswith("train: ")
    }
    slowest = min(trained, key=lambda d: trained[d])
    rollout = numbers(rows["rollout only, imitation base"])[3]
    return [
        Figure(
            "sim_throughput",
            f"AuditWorld training episodes per CPU-s (slowest design: {slowest})",
            f"{trained[slowest]:,.0f}",
            ">= 100,000",
            trained[slowest] >= 100_000,
            f"rollout only: {rollout:,.0f}/CPU-s",
        ),
    ]


def _cli(rows: Rows, out: str) -> list[Figure]:
    inspect = rows.get("inspect --help (for scale)")
    anchor = f"inspect --help: {numbers(inspect)[1]:.2f} CPU-s" if inspect else "inspect not found"
    figures = []
    for command, goal in (("auditrl --help", 1.0), ("auditrl behaviors list", 1.0), ("auditrl audit --help", None)):
        cpu = numbers(rows[command])[1]
        figures.append(Figure("cli_startup", f"`{command}` CPU-s (median)", f"{cpu:.2f}", "< 1" if goal else "—",
                              cpu < goal if goal else None, anchor))  # fmt: skip
    return figures


def _strategies(rows: Rows, out: str) -> list[Figure]:
    cpu = numbers(next(cells for name, cells in rows.items() if name.startswith("CPU time")))[0]
    peak = numbers(rows["peak resident memory"])[0]
    figures = [
        Figure(
            "strategies_at_scale", "`auditrl strategies`, 81,000 transcripts: CPU-s", f"{cpu:.1f}", "<= 30", cpu <= 30.0
        ),
        Figure(
            "strategies_at_scale",
            "... peak resident memory, GiB",
            f"{peak:.2f}",
            "<= 2 GB (1.86 GiB)",
            peak * 2**30 <= 2e9,
        ),
    ]
    measure, goal = "... lowest bootstrap ARI over seeds", f">= {STRATEGIES_ARI_FLOOR:.3f} (before)"
    if "bootstrap ARI per seed" in rows:
        ari = min(numbers(rows["bootstrap ARI per seed"]))
        figures.append(Figure("strategies_at_scale", measure, f"{ari:.3f}", goal, ari >= STRATEGIES_ARI_FLOOR))
    else:
        figures.append(Figure("strategies_at_scale", measure, "too few transcripts for stability", goal, None))
    return figures


def _concurrent(rows: Rows, out: str) -> list[Figure]:
    speedup = numbers(rows["concurrent"])[4]
    growth = re.search(r"([-+]\d+\.\d) KiB per audit", out)
    anchor = f"client memory {growth.group(1)} KiB per audit" if growth else ""
    return [
        Figure(
            "concurrent_audits",
            "audits at a time vs sequential, speed-up",
            f"{speedup:.1f}x",
            ">= 30x",
            speedup >= 30.0,
            anchor,
        )
    ]


def _batched(rows: Rows, out: str) -> list[Figure]:
    speedup = numbers(rows["per-turn batched + KV cache"])[3]
    sequential = numbers(rows["per-episode sequential"])[0]
    return [
        Figure("batched_generation", "per-turn batched + KV cache, speed-up", f"{speedup:.2f}x", "> 1x", speedup > 1.0,
               f"per-episode sequential: {sequential:.1f} s"),
    ]  # fmt: skip


@dataclass(frozen=True)
class Benchmark:
    script: str
    args: tuple[str, ...]
    tiny: tuple[str, ...] | None  # None: not run at the tiny size (it needs a model)
    read: Callable[[Rows, str], list[Figure]]


BENCHMARKS = (
    Benchmark("engine_overhead.py", (), ("--episodes", "1"), _engine),
    Benchmark(
        "sim_throughput.py",
        (),
        ("--steps", "1", "--groups", "2", "--group-size", "2", "--max-turns", "2", "--base-audits", "16"),
        _sim,
    ),
    Benchmark("cli_startup.py", (), ("--repeats", "1"), _cli),
    Benchmark("strategies_at_scale.py", ("--transcripts", "81000"), ("--transcripts", "600"), _strategies),
    Benchmark(
        "concurrent_audits.py",
        (),
        ("--episodes", "2", "--concurrency", "2", "--sequential", "1", "--latency-ms", "1", "--turns", "1"),
        _concurrent,
    ),
    Benchmark("batched_generation.py", (), None, _batched),
)


def cpu_capability() -> str:
    """torch's name for the vector instructions its kernels use here (AVX2, AVX512, ...)."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


def run(script: str, args: tuple[str, ...]) -> tuple[str, float]:
    """stdout of one benchmark script (one thread, a wide console) and its CPU seconds, children included."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "250", "NO_COLOR": "1"}
    before = os.times()
    done = subprocess.run(
        [sys.executable, str(HERE / script), *args], capture_output=True, text=True, env=env, check=False
    )
    after = os.times()
    if done.returncode != 0:
        raise RuntimeError(f"{script} exited {done.returncode}: {(done.stderr or done.stdout).strip()[-500:]}")
    return done.stdout, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def main(
    tiny: bool = typer.Option(
        False, help="Run every script at its smallest size (checks the table, measures nothing)."
    ),
    only: str = typer.Option("", help="Comma-separated script names (without .py) to run; default all."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the figures to this JSON file."),
) -> None:
    wanted = {s.strip() for s in only.split(",") if s.strip()}
    known = {b.script.removesuffix(".py") for b in BENCHMARKS}
    if wanted - known:
        raise typer.BadParameter(
            f"unknown benchmark(s) {', '.join(sorted(wanted - known))}; known: {', '.join(sorted(known))}"
        )
    capability = cpu_capability()
    console = Console(width=200)
    figures: list[Figure] = []
    start = time.perf_counter()
    for b in BENCHMARKS:
        name = b.script.removesuffix(".py")
        if wanted and name not in wanted:
            continue
        if tiny and b.tiny is None:
            figures.append(Figure(name, "not run at the tiny size (needs a model)", "—", "—", None))
            continue
        console.print(f"running {b.script} ...")
        try:
            out, cpu = run(b.script, b.tiny if tiny else b.args)
            figures += b.read(table_rows(out), out)
        except (RuntimeError, KeyError, IndexError, ValueError) as exc:
            figures.append(Figure(name, f"failed: {exc}", "—", "—", False))
            continue
        console.print(f"  {b.script}: {cpu:.1f} CPU-s", markup=False)
    table = Table(
        title=f"Benchmarks against their goals — CPU capability {capability}, {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f}{' (tiny sizes: not measurements)' if tiny else ''}; "
        f"{time.perf_counter() - start:.0f} s wall"
    )
    for column in ("benchmark", "measure", "figure", "goal", "met", "anchor (same run)"):
        table.add_column(column, justify="right" if column in ("figure", "goal") else "left")
    for f in figures:
        met = "—" if f.met is None else ("yes" if f.met else "NO")
        table.add_row(*(escape(c) for c in (f.benchmark, f.measure, f.value, f.goal, met, f.anchor)))
    console.print(table)
    if json_out is not None:
        payload = {"cpu_capability": capability, "tiny": tiny, "figures": [f.__dict__ for f in figures]}
        json_out.write_text(json.dumps(payload, indent=2), encoding="utf-8")


if __name__ == "__main__":
    typer.run(main)
