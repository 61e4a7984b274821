"""Atomic file writes (results, reports, checkpoints and references are never seen half written), and the
check that an output can be written at all, made before a command spends anything on model calls."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def atomic_write_text(path: Path, text: str) -> Path:
    """Write via a temporary file in the same directory, fsync, then rename over `path`.

    The file gets the permissions an ordinary `open` would give it (mkstemp's are owner-only), so
    reports and results are as readable as the transcripts beside them.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
            os.fchmod(fh.fileno(), 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


class OutputError(ValueError):
    """An output a command cannot write, or one that would overwrite an input of the same command."""


def _same_file(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def _nearest_existing(path: Path) -> Path:
    for folder in (path, *path.parents):
        if folder.exists():
            return folder
    return Path.cwd()


def _probe(folder: Path) -> str | None:
    """Why no file can be created in `folder` (None: one can); tried for real, since permissions alone
    do not show a read-only file system or a full quota."""
    try:
        fd, name = tempfile.mkstemp(prefix=".auditrl-probe-", dir=folder)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    os.close(fd)
    os.unlink(name)
    return None


def check_output(path: Path, what: str, *, directory: bool = False, inputs: tuple[Path, ...] = ()) -> None:
    """Refuse, before any work is done, an output `path` (named `what` in the message, e.g. '--json out.json')
    that cannot be written, is the wrong kind of thing (a folder for a file, or a file for a `directory`), or
    is one of the command's `inputs`."""
    path = Path(path)
    for source in inputs:
        if _same_file(path, Path(source)):
            raise OutputError(f"{what}: {path} is an input of this command; writing it would replace what is read")
    if directory and path.exists() and not path.is_dir():
        raise OutputError(f"{what}: {path} is a file; give a directory")
    if not directory and path.is_dir():
        raise OutputError(f"{what}: {path} is a directory; give a file name")
    if path.exists() and not directory:
        if not os.access(path, os.W_OK):
            raise OutputError(f"{what}: {path} cannot be written (no write permission or a read-only file system)")
        return
    folder = _nearest_existing(path if directory else path.parent)
    if not folder.is_dir():
        raise OutputError(f"{what}: {folder} is a file, so {path} cannot be created")
    reason = _probe(folder)
    if reason is not None:
        raise OutputError(f"{what}: cannot write in {folder} ({reason})")
