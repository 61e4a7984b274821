"""Grouping a run's transcripts for comparison tables (by auditor, target, family, behavior or metadata)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from auditrl.scaffold.transcript import Transcript

FIELD_GROUPS = {
    "auditor": "auditor_model",
    "auditor_model": "auditor_model",
    "target": "target_model",
    "target_model": "target_model",
    "target_family": "target_family",
    "behavior": "behavior_id",
    "behavior_id": "behavior_id",
}


class Groupable(Protocol):
    """What a group is read from: a whole transcript, or a view of the fields that name groups."""

    @property
    def auditor_model(self) -> str: ...
    @property
    def target_model(self) -> str: ...
    @property
    def target_family(self) -> str | None: ...
    @property
    def behavior_id(self) -> str | None: ...
    @property
    def metadata(self) -> dict[str, Any]: ...


def group_of(t: Groupable, by: str) -> str:
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
