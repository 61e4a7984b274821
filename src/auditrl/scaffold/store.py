"""Transcripts on disk: append-only JSONL, one transcript per line, written as each audit finishes.

Appending (one `write` of a whole line, then fsync) means a crash loses at most the transcript being
written; reading skips such a truncated final line with a warning and fails loudly, naming the file
and the line, on any other corrupt line.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

from pydantic import ValidationError

from auditrl.atomic import atomic_write_text
from auditrl.scaffold.transcript import Transcript

TRANSCRIPTS = "transcripts.jsonl"
"""The file name under which a run directory keeps its transcripts."""
TRANSCRIPT_GLOB = "transcripts*.jsonl"
INSPECT_LOG_GLOB = "*.eval"
"""Inspect logs (auditrl's exports, `auditrl/audit` task runs, Petri 3 audits): read by `inspect_import`."""


class RunError(ValueError):
    """The run path holds no readable transcripts; the message names the file (and line)."""


def append_transcript(path: Path, transcript: Transcript) -> None:
    """Append one transcript as a JSON line and fsync it (creates the file and its folder)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = transcript.model_dump_json().encode("utf-8") + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = 0
        while written < len(line):
            written += os.write(fd, line[written:])
        os.fsync(fd)
    finally:
        os.close(fd)


def iter_transcripts(path: Path) -> Iterator[Transcript]:
    """The transcripts of a JSONL file one at a time, in order of writing (a large file never sits in memory whole),
    or of an Inspect `.eval` log, one per sample."""
    path = Path(path)
    if path.suffix == ".eval":
        from auditrl.scaffold.inspect_import import iter_eval_transcripts  # inspect-ai is heavy; most reads are JSONL

        yield from iter_eval_transcripts(path)
        return
    with path.open("rb") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield Transcript.model_validate_json(line)
            except ValidationError as e:
                if not line.endswith(b"\n") and not handle.read(1):
                    warnings.warn(
                        f"{path}: skipped line {number}, an incomplete final transcript (interrupted write)",
                        stacklevel=2,
                    )
                    return
                first = e.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "(line)"
                got = f" (got {first['input']!r:.60})" if first["loc"] and first["type"] != "missing" else ""
                raise ValueError(f"{path}: line {number} is not a valid transcript: {where}: {first['msg']}{got}") from None


def read_transcripts(path: Path) -> list[Transcript]:
    """All transcripts of a JSONL file, in order of writing."""
    return list(iter_transcripts(path))


def write_transcripts(path: Path, transcripts: Sequence[Transcript]) -> Path:
    """Write a whole JSONL file atomically (for derived files such as scored copies)."""
    return atomic_write_text(path, "".join(t.model_dump_json() + "\n" for t in transcripts))


def transcript_files(run: Path) -> list[Path]:
    """`run` itself if it is a file, else every transcripts*.jsonl below it (sorted), else every Inspect `.eval` log.

    A run directory holds its JSONL and an Inspect log of the same audits, so logs are read only where no
    JSONL is (a log directory of `inspect eval` or Petri)."""
    if run.is_file():
        return [run]
    if not run.is_dir():
        raise RunError(f"{run}: no such file or directory")
    files = sorted(run.rglob(TRANSCRIPT_GLOB)) or sorted(run.rglob(INSPECT_LOG_GLOB))
    if not files:
        raise RunError(f"{run}: no {TRANSCRIPT_GLOB} file or Inspect {INSPECT_LOG_GLOB} log in this directory or below")
    return files


def load_transcripts(run: Path) -> list[Transcript]:
    """All transcripts of a run (a JSONL file or a run directory), each id once.

    A directory may hold a run's transcripts and scored copies of them (`auditrl judge score` writes
    `transcripts.scored-<design>.jsonl` beside its input); a transcript id seen again takes the later
    file's version with the scores of both merged, so nothing is counted twice.
    """
    by_id: dict[str, Transcript] = {}
    for path in transcript_files(run):
        try:
            loaded = read_transcripts(path)
        except ValueError as exc:
            raise RunError(str(exc)) from exc
        for t in loaded:
            earlier = by_id.get(t.id)
            if earlier is not None:
                t.scores = {**earlier.scores, **t.scores}
            by_id[t.id] = t
    if not by_id:
        raise RunError(f"{run}: the transcript files are empty")
    return list(by_id.values())
