"""Transcripts on disk: append-only JSONL, one transcript per line, written as each audit finishes.

Appending (one `write` of a whole line, then fsync) means a crash or a full disk loses at most the
transcript being written. The torn line it leaves is set aside before the next append (kept in
`<file>.torn`, never deleted), so a resumed run never glues a new transcript onto a fragment; reading
skips such a torn final line (one that is not JSON and lacks its newline) and says so, and fails loudly,
naming the file and the line, on any other line that is not a transcript (valid JSON of the wrong shape
included, and values no audit has, such as negative counts). Each line is bounded (auditrl.reading).
Every line is valid UTF-8 JSON with the environment's secrets redacted, whatever text the models produced.

Reading a run (`read_run`) takes each transcript id once: an identical copy is excluded and counted, two
different transcripts under one id are an error, and a transcript of a behavior neither the library nor
the run's record knows is excluded and counted; the command's summary (`LoadedRun.describe`) states both.

A run directory keeps its transcripts in `transcripts.jsonl` (in it or in folders below it).
Discovery reads only those: never the rollouts a trainer set aside (`transcripts.superseded.jsonl`),
torn fragments, judge caches or scored copies, unless a command asks for the scored copy it wrote.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from auditrl.atomic import atomic_write_text
from auditrl.models.secrets import redact, secret_values
from auditrl.reading import TRANSCRIPT_LINE, FileReadError, bounded_lines, parse_json
from auditrl.safe_text import clean_strings, short_repr
from auditrl.scaffold.transcript import Transcript

TRANSCRIPTS = "transcripts.jsonl"
"""The file name under which a run directory keeps its transcripts."""
SUPERSEDED = "transcripts.superseded.jsonl"
"""Transcripts set aside beside a run's transcripts.jsonl: kept, never read as the run's (see `supersede`)."""
TORN_SUFFIX = ".torn"
"""A transcripts file's torn final lines are kept in `<file name>.torn` beside it."""
_CHUNK = 1 << 16

TranscriptReader = Callable[[Path, Callable[[str], None]], Iterator[Transcript]]
"""Reads one transcript file in order; the callback takes a note about anything skipped (a torn last line)."""


class RunError(ValueError):
    """The run path holds no readable transcripts; the message names the file (and line)."""


def _encoded(t: Transcript) -> tuple[Transcript, str]:
    """`t` made safe to store (lone surrogates replaced, secrets redacted) and its JSON; `t` itself when it was."""
    try:
        data = t.model_dump_json()
    except PydanticSerializationError:  # text no UTF-8 file can hold, e.g. half an emoji cut off by a proxy
        t = Transcript.model_validate(clean_strings(t.model_dump()))
        data = t.model_dump_json()
    if any(value in data for value in secret_values()):
        data = redact(data)
        t = Transcript.model_validate_json(data)
    return t, data


def safe_transcript(t: Transcript) -> Transcript:
    """`t` as it will be stored: showing, judging or exporting it is then as safe as storing it."""
    return _encoded(t)[0]


def transcript_line(t: Transcript) -> bytes:
    """The stored line of `t`: valid UTF-8 JSON, secrets redacted, newline-terminated."""
    return _encoded(t)[1].encode("utf-8") + b"\n"


@dataclass(frozen=True)
class TornTail:
    """A torn final line set aside: how many bytes, and where they are kept."""

    size: int
    kept_in: Path

    def describe(self, path: Path) -> str:
        return f"{path}: set aside a torn final line ({self.size:,} bytes, an interrupted write) in {self.kept_in}"


def heal_torn_tail(path: Path) -> TornTail | None:
    """Make `path` end on a complete line before anything is appended to it.

    A final line without its newline is either a whole transcript (the newline was lost: it is completed),
    JSON of another shape (an error: this is not a torn write), or a fragment of an interrupted write, which
    is appended to `<name>.torn` (fsynced) before the file is cut back to its last complete line. Returns what
    was set aside, if anything.
    """
    path = Path(path)
    if not path.is_file():
        return None
    with path.open("rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return None
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return None
        start = size
        while start > 0:
            begin = max(0, start - _CHUNK)
            f.seek(begin)
            chunk = f.read(start - begin)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                start = begin + newline + 1
                break
            start = begin
        f.seek(start)
        tail = f.read()
        try:
            Transcript.model_validate_json(tail)
        except ValidationError:
            if _is_json(tail):  # a whole line of the wrong shape, not an interrupted write: not ours to set aside
                raise FileReadError(
                    f"{path}: the last line is JSON but not a transcript; is this a transcripts file?"
                ) from None
        else:
            f.seek(0, os.SEEK_END)
            f.write(b"\n")
            f.flush()
            os.fsync(f.fileno())
            return None
        kept = path.with_name(path.name + TORN_SUFFIX)
        with kept.open("ab") as side:
            side.write(tail + b"\n")
            side.flush()
            os.fsync(side.fileno())
        f.truncate(start)
        f.flush()
        os.fsync(f.fileno())
    return TornTail(len(tail), kept)


def append_transcript(path: Path, transcript: Transcript) -> None:
    """Append one transcript as a JSON line and fsync it (creates the file and its folder).

    A torn final line left by an earlier interrupted write is set aside first. An OSError (a full disk)
    may leave this line torn in turn; the next append sets it aside.
    """
    path = Path(path)
    line = transcript_line(transcript)
    path.parent.mkdir(parents=True, exist_ok=True)
    heal_torn_tail(path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = 0
        while written < len(line):
            written += os.write(fd, line[written:])
        os.fsync(fd)
    finally:
        os.close(fd)


def supersede(path: Path, keep: Callable[[Transcript], bool]) -> int:
    """Move the transcripts of `path` that `keep` rejects to the superseded file beside it; returns how many.

    For work that is done again: rollouts a resumed trainer regenerates, failed audits a resumed run
    retries, a run started over. The moved lines are appended (fsynced) before `path` is rewritten
    atomically, so a crash in between leaves them in both places, never in neither.
    """
    path = Path(path)
    heal_torn_tail(path)
    if not path.is_file():
        return 0
    kept: list[bytes] = []
    moved: list[bytes] = []
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                (kept if keep(Transcript.model_validate_json(line)) else moved).append(line)
    if moved:
        with path.with_name(SUPERSEDED).open("ab") as side:
            side.write(b"".join(moved))
            side.flush()
            os.fsync(side.fileno())
        atomic_write_text(path, b"".join(kept).decode("utf-8"))
    return len(moved)


def _warn(note: str) -> None:
    warnings.warn(note, stacklevel=3)


def transcript_lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """The non-blank lines of a JSONL transcript file, each within the line limit: (number, line, whether last)."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise FileReadError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    with handle:
        for number, line, last in bounded_lines(handle, path, TRANSCRIPT_LINE):
            if line.strip():
                yield number, line, last


def iter_transcripts(path: Path, on_skip: Callable[[str], None] = _warn) -> Iterator[Transcript]:
    """The transcripts of a JSONL file one at a time, in order of writing (a large file never sits in memory whole)."""
    path = Path(path)
    if path.suffix == ".eval":
        from auditrl.scaffold.inspect_import import iter_eval_transcripts  # inspect-ai is heavy; most reads are JSONL

        yield from iter_eval_transcripts(path)
        return
    for number, line, last in transcript_lines(path):
        t = transcript_of_line(path, number, line, last, on_skip)
        if t is None:
            return
        yield t


def transcript_of_line(
    path: Path, number: int, line: bytes, last: bool, on_skip: Callable[[str], None] = _warn
) -> Transcript | None:
    """The transcript on line `number` of `path`; None for an incomplete final line (noted through `on_skip`).

    Any other line that is not a transcript raises FileReadError naming the file, the line and the field.
    """
    try:
        return Transcript.model_validate_json(line)
    except ValidationError as e:
        if last and not line.endswith(b"\n") and not _is_json(line):
            on_skip(f"{path}: skipped line {number}, an incomplete final transcript (interrupted write)")
            return None
        if not _is_json(line):
            parse_json(line, path, line=number)  # raises, naming what is wrong with the JSON
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(line)"
        got = f" (got {short_repr(first['input'])})" if first["loc"] and first["type"] != "missing" else ""
        problem = f"{path}: line {number} is not a valid transcript: {where}: {first['msg']}{got}"
        raise FileReadError(problem) from None


def _is_json(line: bytes) -> bool:
    try:
        parse_json(line, "")
    except FileReadError:
        return False
    return True


def read_transcripts(path: Path) -> list[Transcript]:
    """All transcripts of one transcript file (JSONL, or an Inspect `.eval` log), in order of writing."""
    return list(read_file(path))


def write_transcripts(path: Path, transcripts: Sequence[Transcript]) -> Path:
    """Write a whole JSONL file atomically (for derived files such as scored copies)."""
    return atomic_write_text(path, "".join(transcript_line(t).decode("utf-8") for t in transcripts))


def scored_copy(path: Path, name: str) -> Path:
    """Where the copy of transcripts file `path` scored by `name` lies: `<stem>.scored-<name>.jsonl` beside it."""
    return path.with_name(f"{path.stem}.scored-{name}.jsonl")


def iter_inspect_log(path: Path, on_skip: Callable[[str], None] = _warn) -> Iterator[Transcript]:
    """The transcripts of an Inspect `.eval` log (auditrl's exports, `auditrl/audit` runs, Petri 3 audits)."""
    from auditrl.scaffold.inspect_import import iter_eval_transcripts  # inspect-ai is heavy; most reads are JSONL

    yield from iter_eval_transcripts(path)


RUN_FILES: tuple[str, ...] = (TRANSCRIPTS, "*.eval")
"""Names (glob patterns) a run directory keeps transcripts under. Within one directory the first pattern
that matches is read and the rest are not (so a log exported beside transcripts.jsonl is not read twice,
and a log directory of `inspect eval` or Petri is read through its logs)."""
READERS: dict[str, TranscriptReader] = {".jsonl": iter_transcripts, ".eval": iter_inspect_log}
"""How each kind of transcript file is read, by its suffix. A new format is one entry here (and a pattern
in RUN_FILES for run directories to find it)."""


def read_file(path: Path, on_skip: Callable[[str], None] = _warn) -> Iterator[Transcript]:
    """The transcripts of one transcript file, read by the reader of its suffix (JSONL when unknown)."""
    return READERS.get(Path(path).suffix, iter_transcripts)(Path(path), on_skip)


def transcript_files(run: Path) -> list[Path]:
    """The transcript files of `run`: `run` itself if it is a file, else those RUN_FILES names below it (sorted)."""
    run = Path(run)
    try:
        if run.is_file():
            return [run]
        if not run.is_dir():
            raise RunError(f"{run}: no such file or directory; no transcripts to read")
        by_folder: dict[Path, list[Path]] = {}
        for pattern in RUN_FILES:
            found: dict[Path, list[Path]] = {}
            for path in run.rglob(pattern):
                if path.is_file() and path.parent not in by_folder:
                    found.setdefault(path.parent, []).append(path)
            by_folder.update(found)
    except OSError as exc:  # a name too long for the file system, a folder that cannot be listed
        raise RunError(f"{run}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    files = sorted(p for paths in by_folder.values() for p in paths)
    if not files:
        raise RunError(f"{run}: no {' or '.join(RUN_FILES)} file in this directory or below")
    return files


@dataclass
class LoadedRun:
    """The transcripts of a run, each id once, and what was read to get them."""

    transcripts: list[Transcript]
    files: list[Path]
    scored_files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    excluded: Counter[str] = field(default_factory=Counter)
    """Transcripts read but left out, counted by reason."""

    def describe(self) -> str:
        """One line: how many transcripts from which files (and scored copies), and how many were left out, why."""
        scored = f", scores merged from {', '.join(map(str, self.scored_files))}" if self.scored_files else ""
        left_out = ""
        if self.excluded:
            reasons = "; ".join(f"{n} {reason}" for reason, n in sorted(self.excluded.items()))
            left_out = f"; excluded {sum(self.excluded.values())} ({reasons})"
        return f"read {len(self.transcripts)} transcript(s) from {', '.join(map(str, self.files))}{scored}{left_out}"


def _run_behaviors(run: Path) -> set[str]:
    """The behavior ids a run's transcripts may name: the library's, and those its run record lists."""
    from auditrl.behaviors.library import load_behaviors
    from auditrl.rundir import recorded_behaviors

    return set(load_behaviors()) | recorded_behaviors(run if run.is_dir() else run.parent)


def read_run(run: Path, scored: str | None = None) -> LoadedRun:
    """All transcripts of a run (a transcript file or a run directory), each id once, in order of reading.

    With `scored`, the copy scored by that name (`transcripts.scored-<scored>.jsonl`, beside each file read
    and in the run directory itself) is merged in: a transcript seen again takes the scored version with
    the scores of both; a scored copy never adds transcripts of its own.
    """
    run = Path(run)
    files = transcript_files(run)
    loaded = LoadedRun([], files)
    by_id: dict[str, Transcript] = {}
    known = _run_behaviors(run)

    def merge(path: Path, reader: TranscriptReader, add: bool) -> None:
        """Read `path` into by_id: a transcript seen again in a scored copy keeps the scores of both; only `add`
        (a transcript file, not a scored copy) brings new ids, and there an id seen again is a duplicate."""
        try:
            for position, t in enumerate(reader(path, loaded.notes.append), 1):
                earlier = by_id.get(t.id)
                if add and t.behavior_id is not None and t.behavior_id not in known:
                    loaded.excluded[f"of unknown behavior {short_repr(t.behavior_id)}"] += 1
                    continue
                if add and earlier is not None:
                    if earlier != t:
                        raise RunError(
                            f"{path}: transcript {position} has id {short_repr(t.id)}, as has a different transcript "
                            "read before it; one of them is not this run's (remove it)"
                        )
                    loaded.excluded["repeated copies of one transcript"] += 1
                    continue
                if earlier is not None:
                    t.scores = {**earlier.scores, **t.scores}
                if add or earlier is not None:
                    by_id[t.id] = t
        except (ValueError, OSError) as exc:
            raise RunError(str(exc)) from exc

    for path in files:
        merge(path, read_file, add=True)
    if scored is not None:
        copies = {scored_copy(p, scored) for p in files}
        if run.is_dir():
            copies.add(scored_copy(run / TRANSCRIPTS, scored))
        for path in sorted(p for p in copies if p.is_file() and p not in files):
            loaded.scored_files.append(path)
            merge(path, iter_transcripts, add=False)
    if not by_id:
        raise RunError(f"{run}: no transcripts in {' or '.join(map(str, files))} (the files are empty)")
    loaded.transcripts = list(by_id.values())
    return loaded


def read_audits(source: Path) -> list[Transcript]:
    """The audits stored at `source`: a run directory (its transcripts.jsonl), a transcripts file, or a directory of
    them (every .jsonl beneath it); raises ValueError naming `source` when it holds none."""
    source = Path(source)
    if source.is_file():
        files = [source]
    elif (source / TRANSCRIPTS).is_file():
        files = [source / TRANSCRIPTS]
    else:
        files = sorted(source.rglob("*.jsonl")) if source.is_dir() else []
    audits = [t for f in files for t in read_transcripts(f)]
    if not audits:
        raise ValueError(f"{source}: no stored audits (a run directory, a transcripts .jsonl file or a folder of them)")
    return audits
