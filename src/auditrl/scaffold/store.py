"""Transcripts on disk: append-only JSONL, one transcript per line, written as each audit finishes.

Appending (one `write` of a whole line, then fsync) means a crash loses at most the transcript being
written; reading skips such a truncated final line with a warning and fails loudly, naming the file
and the line, on any other corrupt line.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from pydantic import ValidationError

from auditrl.scaffold.transcript import Transcript


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


def read_transcripts(path: Path) -> list[Transcript]:
    """All transcripts of a JSONL file, in order of writing."""
    path = Path(path)
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    complete = raw.endswith(b"\n")
    transcripts: list[Transcript] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            transcripts.append(Transcript.model_validate_json(line))
        except ValidationError as e:
            if number == len(lines) and not complete:
                warnings.warn(
                    f"{path}: skipped line {number}, an incomplete final transcript (interrupted write)",
                    stacklevel=2,
                )
                continue
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(line)"
            raise ValueError(f"{path}: line {number} is not a valid transcript: {where}: {first['msg']}") from None
    return transcripts
