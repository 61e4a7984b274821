"""Reference transcripts for reference-pairwise rewards: one per (behavior, seed), refreshed on a schedule
from policy snapshots, persisted as one JSON file written atomically."""

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
    """References keyed by "<behavior or benign>/<seed>/<family>"; an entry is due for refresh `refresh_every` steps
    after the step it was taken from (the paper found 50 best)."""

    def __init__(self, path: Path | None = None, *, refresh_every: int = 50) -> None:
        if refresh_every < 1:
            raise ValueError(f"refresh_every must be >= 1, got {refresh_every}")
        self.path = path
        self.refresh_every = refresh_every
        self.entries: dict[str, ReferenceEntry] = {}
        self._pending: dict[str, ReferenceEntry] = {}
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
        payload = {"refresh_every": self.refresh_every, "references": {k: v.model_dump(mode="json") for k, v in self.entries.items()}}
        atomic_write_text(self.path, json.dumps(payload))

    def get(self, key: str) -> Transcript | None:
        entry = self.entries.get(key)
        return entry.transcript if entry else None

    def step_of(self, key: str) -> int | None:
        entry = self.entries.get(key)
        return entry.step if entry else None

    def refresh_due(self, key: str, step: int) -> bool:
        entry = self.entries.get(key)
        return entry is None or step - entry.step >= self.refresh_every

    def put(self, t: Transcript, step: int, *, after_scoring: bool = False) -> None:
        """Make `t` (from the policy at `step`) the reference; `after_scoring` defers it to `commit_pending`."""
        entry = ReferenceEntry(step=step, transcript=t)
        if after_scoring:
            self._pending[self.key_of(t)] = entry
        else:
            self.entries[self.key_of(t)] = entry
            self.save()

    def commit_pending(self) -> None:
        if self._pending:
            self.entries.update(self._pending)
            self._pending.clear()
            self.save()

    def refresh(self, step: int, snapshot: Iterable[Transcript]) -> int:
        """Replace references with a policy snapshot's transcripts (first per key); returns keys refreshed."""
        fresh: dict[str, ReferenceEntry] = {}
        for t in snapshot:
            fresh.setdefault(self.key_of(t), ReferenceEntry(step=step, transcript=t))
        self.entries.update(fresh)
        self.save()
        return len(fresh)
