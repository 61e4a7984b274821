"""Concurrent audits against an API with 200 ms latency (goal: 64 at a time, 30x sequential, bounded memory).

A loopback OpenAI-compatible server (auditrl.testing), in its own process as a real API is, plays auditor
and target through inspect-ai's `openai-api` provider, answering every request after `--latency-ms`.
The same audits run through `auditrl audit`'s runner sequentially and then `--concurrency` at a time;
throughput and the client's CPU time per audit are compared. A long run of 4x the episodes at the same
concurrency reads the client's resident memory when N and when 4N audits have finished: memory bounded by
the audits in flight grows by about nothing per audit between the two.

    python benchmarks/concurrent_audits.py --episodes 64 --concurrency 64 --latency-ms 200
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import typer
from rich.console import Console
from rich.table import Table

from auditrl.behaviors.library import GENERAL, load_seeds
from auditrl.cli.audit import build_specs
from auditrl.scaffold.transcript import Budget
from auditrl.testing.openai_server import OpenAIServerProcess, Reply, ScriptedAuditor

MIB = 1024 * 1024
POLL_S = 0.05


@dataclass
class Phase:
    """One run's wall and client CPU seconds, failed audits, and client RSS (MiB) when `marks` audits had finished."""

    wall_s: float
    cpu_s: float
    errors: int
    rss_at: dict[int, float]


def _finished(out: Path) -> int:
    return out.read_bytes().count(b"\n") if out.is_file() else 0


async def _watch_rss(out: Path, marks: list[int], rss_at: dict[int, float]) -> None:
    """Read this process's RSS the moment each mark of finished audits is reached."""
    me = psutil.Process()
    for mark in marks:
        while _finished(out) < mark:
            await asyncio.sleep(POLL_S)
        rss_at[mark] = me.memory_info().rss / MIB


def run(auditor: str, target: str, episodes: int, concurrency: int, turns: int, out: Path, marks: list[int]) -> Phase:
    # Imported here, not at the top: each server process is spawned, and a spawned child imports this script again
    # (as __mp_main__); at the top, inspect-ai's import would cost each of the six servers about 3 CPU-s.
    from auditrl.models.roles import resolve_model
    from auditrl.scaffold.runner import audit_jobs, open_run, run_audits

    seeds = sorted(load_seeds(behavior=GENERAL), key=lambda s: s.id)
    specs = build_specs(None, seeds, episodes, Budget(max_turns=turns), auditor, target, "native")
    rss_at: dict[int, float] = {}

    async def audits_and_watch() -> int:
        with open(os.devnull, "w") as sink:
            jobs = audit_jobs(specs, resolve_model(auditor), resolve_model(target))
            audits = run_audits(jobs, open_run(out), concurrency=concurrency, console=Console(file=sink))
            outcomes, _ = await asyncio.gather(audits, _watch_rss(out, marks, rss_at))
        return len(outcomes.errors)

    start, cpu = time.perf_counter(), time.process_time()
    errors = asyncio.run(audits_and_watch())
    return Phase(time.perf_counter() - start, time.process_time() - cpu, errors, rss_at)


def main(
    episodes: int = typer.Option(64, help="Episodes in the concurrent run (N); the long run has 4N."),
    concurrency: int = typer.Option(64, help="Episodes at a time."),
    sequential: int = typer.Option(8, help="Episodes in the sequential run (its per-episode time is the baseline)."),
    latency_ms: int = typer.Option(200, help="Server latency per request."),
    turns: int = typer.Option(3, help="Auditor turns per episode."),
) -> None:
    """Print throughput sequentially and concurrently, the speedup, client CPU per audit and memory growth."""
    delay = latency_ms / 1000
    table = Table(
        title=f"Concurrent audits, {latency_ms} ms per request, {turns} auditor turns per episode "
        "(server in its own process)"
    )
    for column in (
        "run",
        "episodes",
        "at a time",
        "wall s",
        "episodes/s",
        "speedup",
        "client CPU ms/episode",
        "errors",
    ):
        table.add_column(column, justify="left" if column == "run" else "right")
    base = 0.0
    phases = (
        ("sequential", sequential, 1),
        ("concurrent", episodes, concurrency),
        ("concurrent, 4x episodes", 4 * episodes, concurrency),
    )
    for name, n, c in phases:
        # fresh servers (new model names) per phase: inspect-ai keeps one connection pool per model name
        with (
            tempfile.TemporaryDirectory() as tmp,
            OpenAIServerProcess(responder=ScriptedAuditor(turns, delay)) as auditor_server,
            OpenAIServerProcess(default=Reply("We refund within 30 days of purchase.", delay_s=delay)) as target_server,
        ):
            os.environ.update({**auditor_server.environ(), **target_server.environ()})
            auditor, target = auditor_server.model_spec("auditor"), target_server.model_spec("target")
            run(auditor, target, 1, 1, turns, Path(tmp) / "warm-up.jsonl", [1])  # first-call imports and connections
            phase = run(auditor, target, n, c, turns, Path(tmp) / "transcripts.jsonl", sorted({min(episodes, n), n}))
        rate = n / phase.wall_s
        base = base or rate
        table.add_row(
            name,
            str(n),
            str(c),
            f"{phase.wall_s:.1f}",
            f"{rate:.2f}",
            f"{rate / base:.1f}x",
            f"{1000 * phase.cpu_s / n:.0f}",
            str(phase.errors),
        )
        long_run = phase
    console = Console(width=160)
    console.print(table)
    first, last = long_run.rss_at[episodes], long_run.rss_at[4 * episodes]
    growth = (last - first) * 1024 / (3 * episodes)
    console.print(
        f"Client RSS in the long run: {first:.0f} MiB after {episodes} audits, {last:.0f} MiB after {4 * episodes}: "
        f"{growth:+.1f} KiB per audit"
    )


if __name__ == "__main__":
    typer.run(main)
