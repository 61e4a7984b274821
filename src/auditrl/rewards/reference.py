"""Reference transcripts for reference-pairwise rewards: one per (behavior, seed, family), played by a frozen
policy snapshot, persisted as one JSON file written atomically."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ValidationError

from auditrl.atomic import atomic_write_text
from auditrl.scaffold.transcript import Transcript

BENIGN_KEY = "benign"


class ReferenceEntry(BaseModel):
    step: int
    transcript: Transcript


class ReferenceStore:
    """References keyed by "<behavior or benign>/<seed>/<family>", each with the policy step that played it.

    Reference designs only read it: the trainer replaces its entries every step with the rollouts of its
    frozen policy snapshot (auditrl.train.snapshot), and `judge score` loads one from a file or a run."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.entries: dict[str, ReferenceEntry] = {}
        if path is not None and path.exists():
            self._load(path)

    @staticmethod
    def key_of(t: Transcript) -> str:
        """A rollout's reference is of the same behavior, seed and target family."""
        return f"{t.behavior_id or BENIGN_KEY}/{t.seed_id}/{t.target_family}"

    def _load(self, path: Path) -> None:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            self.entries = {k: ReferenceEntry.model_validate(v) for k, v in raw["references"].items()}
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError, ValidationError) as exc:
            raise ValueError(f"{path}: not a reference store ({exc})") from exc

    def save(self) -> None:
        if self.path is None:
            return
        payload = {"references": {k: v.model_dump(mode="json") for k, v in self.entries.items()}}
        atomic_write_text(self.path, json.dumps(payload))

    def get(self, key: str) -> Transcript | None:
        entry = self.entries.get(key)
        return entry.transcript if entry else None

    def replace(self, step: int, references: Iterable[Transcript]) -> int:
        """The references become these transcripts of the policy at `step` (first per key); returns the keys."""
        fresh: dict[str, ReferenceEntry] = {}
        for t in references:
            fresh.setdefault(self.key_of(t), ReferenceEntry(step=step, transcript=t))
        self.entries = fresh
        self.save()
        return len(fresh)
