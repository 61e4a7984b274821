"""Bounded reading of every file auditrl reads: a size limit per kind of file, checked while reading (so
`/dev/zero` or a runaway log fails at once instead of filling memory), a nesting limit for JSON, and one
error class whose message is one line naming the file, the position and the limit or the value.

Which limit applies is a property of the kind of file, named in the error, so a user knows what to change:
configs, behavior and seed files are small texts people write; transcript and judge-cache lines and
checkpoints are written by auditrl and only bounded against corruption.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pydantic_core

JSON_DEPTH = 200
"""How deep JSON may nest (pydantic-core's parser refuses deeper nesting; no auditrl file comes near it)."""


class FileReadError(ValueError):
    """A file that cannot be read as its kind; the message is one line naming the file and the problem."""


@dataclass(frozen=True)
class FileKind:
    """A kind of file and the most bytes one may hold (for line-based files: the most bytes per line)."""

    name: str
    max_bytes: int

    def limit(self) -> str:
        return f"the {_size(self.max_bytes)} limit for {self.name}"


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n:,} bytes"


CONFIG = FileKind("a config file", 4 << 20)
BEHAVIOR = FileKind("a behavior file", 1 << 20)
SEED = FileKind("a seed file", 1 << 20)
TRANSCRIPT_LINE = FileKind("a transcript line", 256 << 20)
CACHE_LINE = FileKind("a judge cache line", 64 << 20)
CHECKPOINT = FileKind("a checkpoint file", 1 << 30)
RUN_RECORD = FileKind("a run record", 1 << 20)


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def read_bytes(path: Path, kind: FileKind) -> bytes:
    """The bytes of `path`, refused once they pass `kind`'s limit (read in bounded chunks, never whole first)."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(kind.max_bytes + 1)
    except FileNotFoundError:
        raise FileReadError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise FileReadError(f"{path}: is a directory, expected {kind.name}") from None
    except OSError as exc:
        raise FileReadError(f"{path}: cannot be read ({_why(exc)})") from None
    if len(data) > kind.max_bytes:
        raise FileReadError(f"{path}: larger than {kind.limit()}; is this the right file?")
    return data


def decode_utf8(data: bytes, source: str | Path, *, line: int | None = None) -> str:
    """`data` as UTF-8 text (a leading byte-order mark dropped); an invalid byte is named by its offset."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        where = f"line {line}, " if line is not None else ""
        raise FileReadError(
            f"{source}: {where}byte {exc.start} is not UTF-8 (0x{data[exc.start]:02x}); save the file as UTF-8"
        ) from None


def read_text(path: Path, kind: FileKind) -> str:
    """The UTF-8 text of `path`, bounded by `kind`'s limit."""
    return decode_utf8(read_bytes(path, kind), path)


def parse_json(
    data: bytes | str,
    source: str | Path,
    *,
    line: int | None = None,
    allow_inf_nan: bool = False,
) -> Any:
    """JSON parsed without recursion into Python (nesting past JSON_DEPTH is refused, and NaN and Infinity unless
    `allow_inf_nan`: files that record measurements may hold them)."""
    try:
        return pydantic_core.from_json(data, allow_inf_nan=allow_inf_nan)
    except ValueError as exc:
        where = f"line {line}: " if line is not None else ""
        detail = str(exc)
        if "recursion limit" in detail:
            detail = f"nested deeper than {JSON_DEPTH} levels, the limit for JSON ({detail})"
        raise FileReadError(f"{source}: {where}not valid JSON ({detail})") from None


def read_json(path: Path, kind: FileKind, *, allow_inf_nan: bool = False) -> Any:
    """The JSON value held by `path`, bounded by `kind`'s limit."""
    return parse_json(read_bytes(path, kind), path, allow_inf_nan=allow_inf_nan)


def bounded_lines(handle: IO[bytes], path: Path, kind: FileKind) -> Iterator[tuple[int, bytes, bool]]:
    """(number, line, is_last) for each line of a binary handle, each line refused past `kind`'s limit
    before it is held whole; `is_last` says nothing follows (a final line without its newline is torn)."""
    number = 0
    while True:
        line = handle.readline(kind.max_bytes + 1)
        if not line:
            return
        number += 1
        if len(line) > kind.max_bytes and not line.endswith(b"\n"):
            raise FileReadError(f"{path}: line {number} is longer than {kind.limit()}")
        yield number, line, line.endswith(b"\n") is False or _at_end(handle)


def _at_end(handle: IO[bytes]) -> bool:
    """Whether `handle` has nothing more to read (without consuming anything).

    A buffered file is asked through `peek`, which keeps its buffer (seeking to the end and back would
    drop it, and every line of a large file would be read from the system again)."""
    peek = getattr(handle, "peek", None)
    if peek is not None:
        return not peek(1)
    if handle.seekable():
        here = handle.tell()
        end = handle.seek(0, os.SEEK_END)
        handle.seek(here)
        return here == end
    return False
