"""A long run of audits holds memory bounded by the audits in flight, not by the audits finished.

Audits run against the loopback server in its own process (so only the client's memory is traced). The run
holds its next CONCURRENCY audits at their start after the N-th, 2N-th, 3N-th and 4N-th audit, so that when the
Python memory traced by tracemalloc is read there, every earlier audit has finished, the run is still going, and the
audits in flight are all at the same point: the reading does not depend on how far each one had got. What stays
behind per finished audit (a transcript kept in a list, a growing cache or log buffer) shows in each of the three
differences over N audits; the test bounds their median, so that something made once and kept (a code path first
taken mid-run, as a retry under load is, with what it imports and caches) does not count as growth per audit.

The client is a fresh interpreter that imports this file: tracemalloc counts every allocation of its process, and in a
test worker that is also whatever earlier tests left running or collecting (a log handler writing into a capture
buffer, say), which depends on which tests the worker happened to run first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import itertools
import json
import os
import statistics
import subprocess
import sys
import tracemalloc
import weakref
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest
from inspect_ai.log import transcript
from inspect_ai.model import GenerateConfig
from rich.console import Console

from auditrl.behaviors.library import GENERAL, load_seeds
from auditrl.cli.audit import build_specs
from auditrl.models.roles import resolve_model
from auditrl.scaffold.runner import AuditJob, OnDemand, audit_jobs, open_run, run_audits
from auditrl.scaffold.transcript import Budget, Transcript
from auditrl.testing.openai_server import OpenAIServerProcess, Reply, ScriptedAuditor

N = 10
CONCURRENCY = 6
TURNS = 3
RETAINED_PER_AUDIT_BOUND = 8 * 1024
"""Bytes a finished audit may leave behind; each finished transcript kept in a list leaves about 20 KB."""


class _Marks:
    """Holds the audits from each mark on at their start; once every audit before the mark has finished and
    CONCURRENCY audits wait there, reads the traced memory (after a full collection) and lets them go on.

    An audit counts as finished when the runner reports it (`on_done`, inside the audit's task), but its task, and with
    it the task's context holding inspect-ai's log of the audit's model events (about 250 KB), lives on until the task
    returns. Which comes last, the mark's finish or its last waiter, depends on when the servers' answers arrive, so
    each reading first waits for the tasks of finished audits to end."""

    def __init__(self, marks: list[int]) -> None:
        self.marks = marks
        self.finished = 0
        self.readings: list[int] = []
        self._waiting = dict.fromkeys(marks, 0)
        self._full = {mark: asyncio.Event() for mark in marks}
        self._read = {mark: asyncio.Event() for mark in marks}
        self._finishing: weakref.WeakSet[asyncio.Task[object]] = weakref.WeakSet()

    def held(self, jobs: Sequence[AuditJob]) -> Sequence[AuditJob]:
        def job(i: int) -> AuditJob:
            return dataclasses.replace(jobs[i], run=self._after_marks(i, jobs[i].run))

        return OnDemand(len(jobs), job)

    def _after_marks(
        self, position: int, run: Callable[[GenerateConfig], Awaitable[Transcript]]
    ) -> Callable[[GenerateConfig], Awaitable[Transcript]]:
        async def held(config: GenerateConfig) -> Transcript:
            for mark in self.marks:
                if position >= mark and not self._read[mark].is_set():
                    self._waiting[mark] += 1
                    self._check(mark)
                    await self._read[mark].wait()
            return await run(config)

        return held

    def done(self, _: Transcript) -> None:
        self.finished += 1
        task = asyncio.current_task()
        if task is not None:
            self._finishing.add(task)
        for mark in self.marks:
            self._check(mark)

    def _check(self, mark: int) -> None:
        if self.finished == mark and self._waiting[mark] == CONCURRENCY:
            self._full[mark].set()

    async def read(self) -> None:
        for mark in self.marks:
            await self._full[mark].wait()
            ending = [task for task in self._finishing if not task.done()]
            if ending:
                await asyncio.wait(ending)
            del ending  # the ended tasks, and their contexts, are then held by nothing
            gc.collect()
            self.readings.append(tracemalloc.get_traced_memory()[0])
            self._read[mark].set()


def measure(folder: Path) -> list[int]:
    """The traced memory at the N-th, 2N-th, 3N-th and 4N-th finished audit of a run against loopback servers."""
    with (
        OpenAIServerProcess(responder=ScriptedAuditor(TURNS)) as auditor_server,
        OpenAIServerProcess(default=Reply("We refund within 30 days of purchase.")) as target_server,
    ):
        os.environ.update({**auditor_server.environ(), **target_server.environ()})
        auditor, target = auditor_server.model_spec("auditor"), target_server.model_spec("target")
        seeds = sorted(load_seeds(behavior=GENERAL), key=lambda s: s.id)

        async def audits(count: int, out: Path, marks: list[int]) -> list[int]:
            specs = build_specs(None, seeds, count, Budget(max_turns=TURNS), auditor, target, "native")
            watch = _Marks(marks)
            with open(os.devnull, "w") as sink:
                jobs = watch.held(audit_jobs(specs, resolve_model(auditor), resolve_model(target)))
                run = run_audits(
                    jobs, open_run(out), concurrency=CONCURRENCY, on_done=watch.done, console=Console(file=sink)
                )
                outcomes, _ = await asyncio.gather(run, watch.read())
            assert outcomes.finished == count and outcomes.errors == [], outcomes.errors
            return watch.readings

        async def readings() -> list[int]:
            transcript()  # an inspect-ai transcript in the outer context, as an earlier eval in the process leaves it
            await audits(CONCURRENCY, folder / "warm-up.jsonl", [])  # first-call imports, connection pools
            tracemalloc.start()
            try:
                # CONCURRENCY more than 4N, so audits are still in flight at the last mark
                return await audits(4 * N + CONCURRENCY, folder / "transcripts.jsonl", [N, 2 * N, 3 * N, 4 * N])
            finally:
                tracemalloc.stop()

        return asyncio.run(readings())


CLIENT = (
    "import importlib.util, json, pathlib, sys; spec = importlib.util.spec_from_file_location('memory_client', "
    "sys.argv[1]); client = importlib.util.module_from_spec(spec); spec.loader.exec_module(client); "
    "print(json.dumps(client.measure(pathlib.Path(sys.argv[2]))))"
)
"""Imports this file as a module, not as `__main__`, which the servers' spawned processes would import again."""


@pytest.mark.slow
def test_memory_per_finished_audit_stays_bounded(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, __file__, str(tmp_path)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    readings = json.loads(done.stdout.splitlines()[-1])
    per_audit = [(later - earlier) / N for earlier, later in itertools.pairwise(readings)]
    print(
        f"traced {', '.join(f'{r / 2**20:.2f}' for r in readings)} MiB after {N}, {2 * N}, {3 * N} and {4 * N} audits:"
        f" {', '.join(f'{b:+.0f}' for b in per_audit)} bytes per audit"
    )
    assert len(per_audit) == 3 and statistics.median(per_audit) < RETAINED_PER_AUDIT_BOUND
