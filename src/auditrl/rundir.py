"""One contract per run directory: what it is a run of, and who is writing it.

- `run.json` records what the directory is a run of (the command and what it was run with: auditor,
  target, behaviors, judge, ...). A command run again on it continues only with the same record; another
  one is refused before any model call, naming what differs. Settings that only change how much or how fast
  (rollouts, concurrency) are not part of the contract, and behaviors and seeds accumulate (planted and
  benign audits of one auditor and target may share a directory); the record lists every one used.
- A process writing a run directory holds a lock on it (`.auditrl.lock`, an OS file lock, which the
  kernel releases when the process dies however it dies). A second writer is refused at once, naming the
  first from the owner note beside the lock (pid, host, command, since when). A note left by a process
  that died is the sign of a stale lock: the new writer takes it over and says so.
- `--out` that is empty or only whitespace is refused: it would write into the current directory, or
  into a directory named by a space.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from auditrl.atomic import OutputError, atomic_write_text
from auditrl.reading import RUN_RECORD, FileReadError, read_json
from auditrl.safe_text import short_repr

RECORD = "run.json"
"""The file in which a run directory records what it is a run of."""
LOCK = ".auditrl.lock"
"""The lock file of a run directory; `<LOCK>.owner` beside it says who holds it."""
OWNER = LOCK + ".owner"


class RunDirError(OutputError):
    """A run directory this command may not write: held by another process, or a run of something else."""


def out_dir(value: str, option: str = "--out") -> Path:
    """The path an `--out` option names; an empty or all-whitespace value is refused."""
    if not value.strip():
        raise RunDirError(
            f"{option} {value!r}: give a directory name (an empty or blank --out would write into "
            "the current directory or a directory named by spaces)"
        )
    return Path(value)


def recorded_behaviors(run_dir: Path) -> set[str]:
    """The behavior ids the run record of `run_dir` lists (none when there is no readable record)."""
    path = Path(run_dir) / RECORD
    if not path.is_file():
        return set()
    try:
        record = read_json(path, RUN_RECORD)
    except FileReadError:
        return set()
    behaviors = record.get("settings", {}).get("behaviors") if isinstance(record, dict) else None
    return {b for b in behaviors if isinstance(b, str)} if isinstance(behaviors, list) else set()


def _differences(before: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    return [
        f"{key} {short_repr(before.get(key))} there, {short_repr(now.get(key))} now"
        for key in sorted({*before, *now}, key=str)
        if before.get(key) != now.get(key)
    ]


ACCUMULATED = ("behaviors", "seeds")
"""Settings a run directory gathers rather than fixes: audits of more behaviors and seeds (planted and benign
audits side by side, say) add to the run; the record lists every one, so readers know them."""


def _read_record(run_dir: Path, option: str) -> dict[str, Any] | None:
    path = Path(run_dir) / RECORD
    if not path.is_file():
        return None
    try:
        record = read_json(path, RUN_RECORD)
    except FileReadError as exc:
        raise RunDirError(f"{option} {run_dir}: its run record cannot be read ({exc}); choose a new {option}") from None
    if not isinstance(record, dict) or not isinstance(record.get("settings"), dict):
        raise RunDirError(f"{option} {run_dir}: {path} is not a run record; choose a new {option}")
    return record


def check_contract(run_dir: Path, command: str, settings: Mapping[str, Any], option: str = "--out") -> None:
    """Refuse, naming the difference, a run directory whose record says it is a run of another command or of
    other settings (ACCUMULATED ones aside). Raises RunDirError; a record that cannot be read is refused by
    name, never overwritten."""
    record = _read_record(run_dir, option)
    if record is None:
        return
    if record.get("command") != command:
        raise RunDirError(
            f"{option} {run_dir}: it holds a run of `auditrl {record.get('command')}`, not of `auditrl {command}`; "
            f"choose a new {option}"
        )
    fixed = {k: v for k, v in record["settings"].items() if k not in ACCUMULATED}
    changed = _differences(fixed, {k: v for k, v in _plain(settings).items() if k not in ACCUMULATED})
    if changed:
        raise RunDirError(
            f"{option} {run_dir}: the {command} there was run with other settings ({'; '.join(changed)}); "
            f"choose a new {option}, or --on-existing overwrite to start over where the command has it"
        )


def _plain(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` as they read back from JSON (tuples as lists, paths as strings)."""
    return json.loads(json.dumps(dict(settings), default=str))


def write_contract(
    run_dir: Path,
    command: str,
    settings: Mapping[str, Any],
    *,
    start_over: bool = False,
) -> None:
    """Record (atomically) what `run_dir` is a run of; ACCUMULATED settings keep what the record listed before
    (unless the run starts over)."""
    now = _plain(settings)
    before = None if start_over else _read_record(run_dir, "--out")
    if before is not None and before.get("command") == command:
        for key in ACCUMULATED:
            earlier = before["settings"].get(key)
            if isinstance(earlier, list) and isinstance(now.get(key), list):
                now[key] = [*earlier, *(v for v in now[key] if v not in earlier)]
    record = {"command": command, "settings": now}
    atomic_write_text(Path(run_dir) / RECORD, json.dumps(record, indent=2) + "\n")


def _owner_note() -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": shlex.join(["auditrl", *sys.argv[1:]]),
        "since": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _describe_owner(note: Any) -> str:
    if not isinstance(note, dict):
        return "a process that left no readable note"
    return (
        f"pid {short_repr(note.get('pid'))} on {short_repr(note.get('host'))}, "
        f"`{short_repr(note.get('command'), 200)}`, since {short_repr(note.get('since'))}"
    )


def _read_owner(path: Path) -> Any:
    try:
        return read_json(path, RUN_RECORD)
    except FileReadError:
        return None


@contextmanager
def run_dir_lock(run_dir: Path, option: str = "--out", on_note: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the lock of `run_dir` while the block writes it (the directory is created). A directory another
    process is writing raises RunDirError at once, naming that process; a stale lock is taken over and
    `on_note` (a callable taking one line) is told so."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(run_dir / LOCK), timeout=0, thread_local=False, is_singleton=False)
    owner = run_dir / OWNER
    try:
        lock.acquire()
    except Timeout:
        held_by = _describe_owner(_read_owner(owner))
        raise RunDirError(
            f"{option} {run_dir}: another process is writing this run directory ({held_by}); "
            f"wait for it to finish, or choose another {option}"
        ) from None
    try:
        if owner.is_file():
            stale = _read_owner(owner)
            if on_note is not None:
                on_note(f"{run_dir}: took over the lock of {_describe_owner(stale)}, which ended without releasing it")
        atomic_write_text(owner, json.dumps(_owner_note()) + "\n")
        yield
    finally:
        owner.unlink(missing_ok=True)
        lock.release()
