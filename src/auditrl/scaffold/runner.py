"""Running many audits into a run's transcripts file: the one runner `audit`, `suite`, `transfer` and
`crux run` share.

- Bounded memory: audits run in a `TaskGroup`, which forgets each finished task (and with it the task's
  context, where inspect-ai keeps its transcript of model events), and each audit logs its model events
  to a transcript of its own. Finished transcripts are streamed to disk; only counts and reasons stay.
- No stalls: each transcript is appended and fsynced in a worker thread, never on the event loop, and
  each model may open `concurrency` connections from the start.
- Isolation: an audit whose model calls fail, whose text cannot be stored as it is, or whose transcript
  cannot be written for a reason of its own is recorded as failed with the reason; the others go on.
- Nothing lost: a torn last line is set aside before the first append (auditrl.scaffold.store). On a run
  that has transcripts, `resume` skips the (seed, rollout) audits it has and runs again the ones that
  failed (their records set aside in transcripts.superseded.jsonl), `append` adds rollouts after the
  last one, `overwrite` sets every old transcript aside and starts over.
- A full or failing disk stops the run (`RunStopped`): nothing new starts, every finished transcript is
  on disk, and running again with the same output resumes.
- One writer: an opened run holds its directory's lock (auditrl.rundir) until it is closed, so a second
  process on the same output is refused at once, and with `command`, the directory's run record must
  match (a resume of something else is refused, naming the difference).
- Lazy: jobs are a sequence made on demand (`OnDemand`) and started as slots free up, so memory does not
  grow with the number of rollouts.
"""

from __future__ import annotations

import asyncio
import weakref
from array import array
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Self, TypeVar, overload

from inspect_ai.log import Transcript as ModelEventLog
from inspect_ai.log._transcript import init_transcript
from inspect_ai.model import GenerateConfig, Model
from inspect_ai.util import AdaptiveConcurrency
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from auditrl.atomic import check_output
from auditrl.models.retries import describe_error
from auditrl.rundir import check_contract, run_dir_lock, write_contract
from auditrl.scaffold.auditor_loop import run_audit
from auditrl.scaffold.engine import AuditEpisode
from auditrl.scaffold.spec import AuditSpec
from auditrl.scaffold.store import (
    SUPERSEDED,
    TornTail,
    append_transcript,
    heal_torn_tail,
    iter_transcripts,
    safe_transcript,
    supersede,
)
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import ROLLOUT
from auditrl.terminal import at_audit

Existing = Literal["resume", "append", "overwrite"]
"""What a run does with transcripts already in its output file."""
AuditKey = tuple[Any, ...]
T = TypeVar("T")
UNSTORABLE = "the transcript could not be stored"


def audit_key(t: Transcript | StoredAudit | AuditJob, marks: Sequence[str]) -> AuditKey:
    """What makes an audit the same audit on a rerun: models, plant, seed, the metadata `marks` its command
    sets (the suite's part, a continuation's crux) and the rollout index."""
    if isinstance(t, AuditJob):
        s = t.spec
        behavior = s.behavior.id if s.behavior is not None else None
        return (s.auditor_model, s.target_model, behavior, s.seed.id, *(t.metadata.get(m) for m in marks), t.rollout)
    return (
        t.auditor_model,
        t.target_model,
        t.behavior_id,
        t.seed_id,
        *(t.metadata.get(m) for m in marks),
        t.metadata.get(ROLLOUT),
    )


@dataclass(frozen=True)
class StoredAudit:
    """What a rerun keeps of a transcript already in the file: what its key is made of and whether it finished
    (not the transcript, so a large run's transcripts do not sit in memory)."""

    auditor_model: str
    target_model: str
    behavior_id: str | None
    seed_id: str
    metadata: dict[str, Any]
    finished: bool


class RunStopped(RuntimeError):
    """The output could no longer be written (a full disk, a failing one): the run stopped with what it finished."""


class OnDemand(Sequence[T]):
    """A sequence whose items are made from their index when asked for, not held: a run of 100,000 audits
    costs the memory of the few in flight."""

    def __init__(self, count: int, make: Callable[[int], T]) -> None:
        self._count = count
        self._make = make

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            picked = range(self._count)[index]
            return OnDemand(len(picked), lambda i: self._make(picked[i]))
        if not -self._count <= index < self._count:
            raise IndexError(index)
        return self._make(index % self._count)


@dataclass(frozen=True)
class AuditJob:
    """One audit to run: its spec (what a failure record names), how to run it, and what marks it."""

    spec: AuditSpec
    run: Callable[[GenerateConfig], Awaitable[Transcript]]
    rollout: int
    metadata: Mapping[str, Any] = field(default_factory=dict)
    sampling_seed: int | None = None


def audit_jobs(
    specs: Sequence[AuditSpec],
    auditor: Model,
    target: Model,
    *,
    sampling_seed: int = 0,
    first_rollout: int = 0,
    episode_type: type[AuditEpisode] = AuditEpisode,
) -> Sequence[AuditJob]:
    """A job per spec running the engine's audit, made when it is asked for; rollout i (from `first_rollout`)
    samples with seed base + i."""

    def runner(spec: AuditSpec) -> Callable[[GenerateConfig], Awaitable[Transcript]]:
        def run(config: GenerateConfig) -> Awaitable[Transcript]:
            return run_audit(
                spec, auditor, target, auditor_config=config, target_config=config, episode_type=episode_type
            )

        return run

    def job(i: int) -> AuditJob:
        spec = specs[i]
        return AuditJob(spec, runner(spec), first_rollout + i, sampling_seed=sampling_seed + first_rollout + i)

    return OnDemand(len(specs), job)


def failed_transcript(spec: AuditSpec, reason: str) -> Transcript:
    """The record of an audit that failed before it produced a transcript of its own."""
    return Transcript(
        auditor_model=spec.auditor_model,
        target_model=spec.target_model,
        target_family=spec.target_family,
        behavior_id=spec.behavior.id if spec.behavior else None,
        seed_id=spec.seed.id,
        seed_instructions=spec.seed.instructions,
        target_system_prompt=spec.target_system_prompt,
        budget=spec.budget,
        status="error",
        error=reason,
    )


class RunLog:
    """A run's transcripts file, opened for this run: what was there, and where new audits go.

    `open_run` checks that the file can be written before anything else happens, sets a torn last line
    aside and reads what the file holds; `plan` picks the jobs still to run.
    """

    def __init__(self, path: Path, existing: Existing = "resume", option: str = "--out") -> None:
        self.path = Path(path)
        self.mode: Existing = existing
        self.option = option
        self.notes: list[str] = []
        self._lock: ExitStack | None = None
        self.torn: TornTail | None = None
        self.present: list[StoredAudit] = []
        self.next_rollout = 0
        self.set_aside = 0
        self.skipped = 0
        self.planned = 0

    def _read(self, command: str | None, settings: Mapping[str, Any] | None) -> None:
        check_output(self.path.parent, f"{self.option} {self.path.parent}", directory=True)
        check_output(self.path, f"{self.option} {self.path.parent}")
        if command is not None and self.mode != "overwrite":
            check_contract(self.path.parent, command, settings or {}, self.option)
        stack = ExitStack()
        stack.enter_context(run_dir_lock(self.path.parent, self.option, self.notes.append))
        self._lock = stack
        weakref.finalize(self, stack.close)
        try:
            self.torn = heal_torn_tail(self.path)
            self._scan()
            if command is not None:
                write_contract(self.path.parent, command, settings or {}, start_over=self.mode == "overwrite")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Give up the run directory's lock (the run is done, or stopped)."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _scan(self) -> None:
        if not self.path.is_file():
            return
        if self.mode == "overwrite":
            self.set_aside = supersede(self.path, lambda t: False)
            return
        rollouts = [-1]
        for t in iter_transcripts(self.path):
            self.present.append(
                StoredAudit(t.auditor_model, t.target_model, t.behavior_id, t.seed_id, t.metadata, t.status != "error")
            )
            if isinstance(t.metadata.get(ROLLOUT), int):
                rollouts.append(t.metadata[ROLLOUT])
        self.next_rollout = max(rollouts) + 1

    def plan(self, jobs: Sequence[AuditJob]) -> Sequence[AuditJob]:
        """The jobs this run must do: for `resume`, those not finished already (failed records of the ones run
        again are set aside first); all of them otherwise. Jobs are made again when asked for, not kept."""
        if self.mode != "resume" or not self.present:
            self.planned = len(jobs)
            return jobs
        marks = sorted({m for j in jobs for m in j.metadata})
        finished: dict[AuditKey, bool] = {}
        for stored in self.present:
            key = audit_key(stored, marks)
            finished[key] = finished.get(key, False) or stored.finished
        todo = array("q")
        retried: set[AuditKey] = set()
        for i, j in enumerate(jobs):
            key = audit_key(j, marks)
            if not finished.get(key, False):
                todo.append(i)
                if key in finished:
                    retried.add(key)
        self.skipped = len(jobs) - len(todo)
        if retried:
            self.set_aside += supersede(self.path, lambda t: audit_key(t, marks) not in retried)
        self.planned = len(todo)
        return OnDemand(len(todo), lambda k: jobs[todo[k]])

    def describe(self) -> str | None:
        """One line on what the planned run does with the transcripts already there (None for a new file)."""
        planned = self.planned
        notes = [*self.notes, *([self.torn.describe(self.path)] if self.torn is not None else [])]
        if self.mode == "overwrite" and self.set_aside:
            notes.append(f"starting over: the {self.set_aside} transcript(s) there were set aside in {SUPERSEDED}")
        elif self.mode == "append" and self.present:
            notes.append(f"appending to {len(self.present)} audit(s) there: new rollouts start at {self.next_rollout}")
        elif self.mode == "resume" and self.present:
            retried = (
                f"; {self.set_aside} failed one(s) set aside in {SUPERSEDED} and run again" if self.set_aside else ""
            )
            notes.append(
                f"resuming {self.path}: {self.skipped} of {self.skipped + planned} audit(s) already done, "
                f"{planned} to run{retried} (--on-existing append or overwrite to do otherwise)"
            )
        return "; ".join(notes) or None

    async def write(self, t: Transcript) -> None:
        """Append `t` in a worker thread (callers write one at a time); an OSError stops the run, any other
        problem with this transcript is recorded as its failure instead."""
        try:
            await asyncio.to_thread(append_transcript, self.path, t)
        except OSError as exc:
            raise RunStopped(f"cannot write {self.path} ({exc.strerror or exc})") from exc
        except Exception as exc:  # noqa: BLE001 - this transcript's problem; the run goes on without it
            reason = f"{UNSTORABLE}: {describe_error(exc)}"
            record = Transcript(
                auditor_model=t.auditor_model, target_model=t.target_model, behavior_id=t.behavior_id,
                seed_id=t.seed_id, seed_instructions="", status="error", error=reason,
                metadata={k: v for k, v in t.metadata.items() if isinstance(v, str | int | float | bool | None)},
            )  # fmt: skip
            try:
                await asyncio.to_thread(append_transcript, self.path, record)
            except OSError as again:
                raise RunStopped(f"cannot write {self.path} ({again.strerror or again})") from again
            t.status, t.error = "error", reason


def open_run(
    path: Path,
    existing: Existing = "resume",
    option: str = "--out",
    *,
    command: str | None = None,
    settings: Mapping[str, Any] | None = None,
) -> RunLog:
    """Open a run's transcripts file for writing, holding its directory's lock until `close` (or the end of a
    `with` block); raises OutputError (before any model call, naming `option`, the command's option for the
    run directory) if it cannot be: not writable, another process writing it, or (with `command` and its
    `settings`) a run of something else there."""
    log = RunLog(path, existing, option)
    log._read(command, settings)
    return log


@dataclass
class AuditOutcomes:
    """What a batch of audits leaves in memory: counts and failure reasons (the transcripts are on disk)."""

    finished: int = 0
    errors: list[str | None] = field(default_factory=list)


def connection_width(config: GenerateConfig, concurrency: int) -> GenerateConfig:
    """Let each model take `concurrency` connections from the start.

    inspect-ai's adaptive connection control starts at 20 connections per model and widens slowly, which
    holds a wider run of audits back; it starts at the run's width here and still backs off on rate
    limits. An explicit `max_connections` or `adaptive_connections` in `config` is left as it is.
    """
    if config.max_connections is not None or config.adaptive_connections is not None:
        return GenerateConfig()
    width = AdaptiveConcurrency(min=min(concurrency, 10), start=concurrency, max=max(concurrency, 100))
    return GenerateConfig(adaptive_connections=width)


async def run_audits(
    jobs: Iterable[AuditJob],
    log: RunLog | None,
    *,
    concurrency: int,
    config: GenerateConfig | None = None,
    after: Callable[[Transcript], Awaitable[None]] | None = None,
    on_done: Callable[[Transcript], None] | None = None,
    console: Console | None = None,
    label: str = "audits",
) -> AuditOutcomes:
    """Run `jobs`, at most `concurrency` at a time, appending each transcript to `log` as it finishes.

    `after` runs on each audit that did not fail, before it is stored (the suite judges it there);
    `on_done` sees each stored transcript (to print it, or to keep it). With `console`, a progress bar.
    Raises RunStopped when `log` can no longer be written.
    """
    jobs = jobs if isinstance(jobs, Sequence) else list(jobs)
    gate = asyncio.Semaphore(concurrency)
    writing = asyncio.Lock()
    outcomes = AuditOutcomes()
    base = config or GenerateConfig()
    base = base.merge(connection_width(base, concurrency))
    columns = (TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    progress = Progress(*columns, console=console, transient=False, disable=console is None)
    task = progress.add_task(label, total=len(jobs))

    async def one(position: int, job: AuditJob) -> None:
        try:
            await audit(position, job)
        finally:
            gate.release()

    async def audit(position: int, job: AuditJob) -> None:
        at_audit(position + 1, len(jobs), job.spec.budget.max_turns)
        seeded = base if job.sampling_seed is None else base.merge(GenerateConfig(seed=job.sampling_seed))
        # inspect-ai logs every request and answer to the context's transcript; this audit's go to one of its
        # own, dropped with it, not to one an earlier eval in this process may have left for all to share
        init_transcript(ModelEventLog())
        try:
            transcript = await job.run(seeded)
        except Exception as exc:  # noqa: BLE001 - recorded as a failed audit, the others go on
            transcript = failed_transcript(job.spec, describe_error(exc))
        try:
            transcript = safe_transcript(transcript)
        except Exception as exc:  # noqa: BLE001 - this audit's text cannot be stored even cleaned; the others go on
            transcript = failed_transcript(job.spec, f"{UNSTORABLE}: {describe_error(exc)}")
        transcript.metadata.update({**job.metadata, ROLLOUT: job.rollout})
        if after is not None and transcript.status != "error":
            try:
                await after(transcript)
            except Exception as exc:  # noqa: BLE001 - a judge that broke leaves the audit unjudged, not lost
                transcript.record_judge_error("after_audit", describe_error(exc))
        if log is not None:
            async with writing:
                await log.write(transcript)
        outcomes.finished += 1
        if transcript.status == "error":
            outcomes.errors.append(transcript.error)
        if on_done is not None:
            on_done(transcript)
        progress.advance(task)

    with progress:
        try:
            # a TaskGroup forgets each task when it finishes; gather would keep every finished task, and with it
            # the task's context, where inspect-ai's transcript of model events (each request and answer) lives
            # and a job is made only when a slot is free, so memory does not grow with the number of jobs
            async with asyncio.TaskGroup() as group:
                for position in range(len(jobs)):
                    await gate.acquire()
                    group.create_task(one(position, jobs[position]))
        except* RunStopped as stopped:
            first = stopped.exceptions[0]
            raise RunStopped(f"{first}: stopped after {outcomes.finished} finished audit(s), all stored") from first
    return outcomes
