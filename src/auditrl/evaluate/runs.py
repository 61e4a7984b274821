"""Finding and reading the transcripts of a run (a JSONL file or a run directory), and grouping them.

Shared by the `evaluate` and `strategies` commands; a bad line fails with its file and line number.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from auditrl.scaffold.store import read_transcripts
from auditrl.scaffold.transcript import Transcript

TRANSCRIPT_GLOB = "transcripts*.jsonl"
FIELD_GROUPS = {
    "auditor": "auditor_model",
    "auditor_model": "auditor_model",
    "target": "target_model",
    "target_model": "target_model",
    "target_family": "target_family",
    "behavior": "behavior_id",
    "behavior_id": "behavior_id",
}


class RunError(ValueError):
    """The run path holds no readable transcripts; the message names the file (and line)."""


def transcript_files(run: Path) -> list[Path]:
    """`run` itself if it is a file, else every transcripts*.jsonl below it (sorted)."""
    if run.is_file():
        return [run]
    if not run.is_dir():
        raise RunError(f"{run}: no such file or directory")
    files = sorted(run.rglob(TRANSCRIPT_GLOB))
    if not files:
        raise RunError(f"{run}: no {TRANSCRIPT_GLOB} file in this directory or below")
    return files


def load_transcripts(run: Path) -> list[Transcript]:
    """All transcripts of a run, in file order (an interrupted final line is skipped with a warning)."""
    out: list[Transcript] = []
    for path in transcript_files(run):
        try:
            out += read_transcripts(path)
        except ValueError as exc:
            raise RunError(str(exc)) from exc
    if not out:
        raise RunError(f"{run}: the transcript files are empty")
    return out


def group_of(t: Transcript, by: str) -> str:
    """A transcript's group: a Transcript field (auditor, target, target_family, behavior) or a metadata key."""
    if by in FIELD_GROUPS:
        value = getattr(t, FIELD_GROUPS[by])
    else:
        value = t.metadata.get(by)
    return "(none)" if value is None else str(value)


def group_transcripts(transcripts: Sequence[Transcript], by: str) -> dict[str, list[Transcript]]:
    groups: dict[str, list[Transcript]] = {}
    for t in transcripts:
        groups.setdefault(group_of(t, by), []).append(t)
    return groups
