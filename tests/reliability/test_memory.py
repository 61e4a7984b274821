"""A long run of audits holds memory bounded by the audits in flight, not by the audits finished.

Audits run against the loopback server in its own process (so only the client's memory is traced). The
Python memory traced by tracemalloc is read as the N-th to (N + CONCURRENCY)-th and the 4N-th to
(4N + CONCURRENCY)-th audits finish, with audits still in flight each time; the least reading of each
window leaves out what the audits in flight happen to hold. What stays behind per finished audit (a
transcript kept in a list, a growing cache or log buffer) shows as the difference over 3N audits.
"""

from __future__ import annotations

import asyncio
import gc
import os
import tracemalloc
from pathlib import Path

import pytest
from inspect_ai.log import transcript
from rich.console import Console

from auditrl.behaviors.library import GENERAL, load_seeds
from auditrl.cli.audit import build_specs
from auditrl.models.roles import resolve_model
from auditrl.scaffold.runner import audit_jobs, open_run, run_audits
from auditrl.scaffold.transcript import Budget
from auditrl.testing.openai_server import OpenAIServerProcess, Reply, ScriptedAuditor

N = 10
"""Enough audits to tell a leak from noise: over 3N audits the suite measured +3.8 KB an audit at N = 10 (+2.5 KB at
N = 30: one-time growth between the windows is spread over fewer audits) and +22 KB with each finished transcript
kept in a list; the bound lies between."""
CONCURRENCY = 6
TURNS = 3
RETAINED_PER_AUDIT_BOUND = 8 * 1024
"""Bytes a finished audit may leave behind (a kept 3-turn transcript alone is several times more)."""


class _Lines:
    """Counts the lines of a growing file, reading only what was appended since the last count."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.count = path, 0, 0

    def __call__(self) -> int:
        if self.path.is_file():
            with self.path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
            self.offset += len(chunk)
            self.count += chunk.count(b"\n")
        return self.count


async def _traced_at(windows: list[range], finished: _Lines) -> list[int]:
    """The least traced bytes (after a full collection) seen as the finished audits go through each window."""
    least = []
    for window in windows:
        readings = []
        for mark in window:
            while finished() < mark:
                await asyncio.sleep(0.01)
            gc.collect()
            readings.append(tracemalloc.get_traced_memory()[0])
        least.append(min(readings, default=0))
    return least


@pytest.mark.slow
def test_memory_per_finished_audit_stays_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with (
        OpenAIServerProcess(responder=ScriptedAuditor(TURNS)) as auditor_server,
        OpenAIServerProcess(default=Reply("We refund within 30 days of purchase.")) as target_server,
    ):
        for key, value in {**auditor_server.environ(), **target_server.environ()}.items():
            monkeypatch.setenv(key, value)
        auditor, target = auditor_server.model_spec("auditor"), target_server.model_spec("target")
        seeds = sorted(load_seeds(behavior=GENERAL), key=lambda s: s.id)

        async def audits(count: int, out: Path, windows: list[range]) -> list[int]:
            specs = build_specs(None, seeds, count, Budget(max_turns=TURNS), auditor, target, "native")
            with open(os.devnull, "w") as sink:
                jobs = audit_jobs(specs, resolve_model(auditor), resolve_model(target))
                run = run_audits(jobs, open_run(out), concurrency=CONCURRENCY, console=Console(file=sink))
                outcomes, traced = await asyncio.gather(run, _traced_at(windows, _Lines(out)))
            assert outcomes.finished == count and outcomes.errors == []
            return traced

        async def measure() -> list[int]:
            transcript()  # an inspect-ai transcript in the outer context, as an earlier eval in the process leaves it
            await audits(CONCURRENCY, tmp_path / "warm-up.jsonl", [])  # first-call imports, connection pools
            tracemalloc.start()
            try:
                # 2 x CONCURRENCY more than 4N, so audits are still in flight all through the last window
                windows = [range(N, N + CONCURRENCY), range(4 * N, 4 * N + CONCURRENCY)]
                return await audits(4 * N + 2 * CONCURRENCY, tmp_path / "transcripts.jsonl", windows)
            finally:
                tracemalloc.stop()

        at_n, at_4n = asyncio.run(measure())
    per_audit = (at_4n - at_n) / (3 * N)
    print(
        f"traced {at_n / 2**20:.1f} MiB after {N} audits, {at_4n / 2**20:.1f} MiB after {4 * N}:"
        f" {per_audit:+.0f} bytes per audit"
    )
    assert per_audit < RETAINED_PER_AUDIT_BOUND
