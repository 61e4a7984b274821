"""Judge response cache keyed by a hash of the judge's question (model, messages, generation config).

Identical questions are answered once: in memory, and across runs through an append-only JSONL file.
Only replies that parsed into a verdict are stored (the client puts them), so an abstention is asked
again on the next run instead of replaying the malformed reply. Lines are read bounded (auditrl.reading);
one that is not an entry is left out with a `CacheWarning`, since every entry can be asked again.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from auditrl.reading import CACHE_LINE, FileReadError, bounded_lines


class CachedResponse(BaseModel):
    completion: str
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)


class _CacheRow(BaseModel):
    """One line of a cache file."""

    key: str
    response: CachedResponse


class CacheWarning(UserWarning):
    """A judge cache file held lines that are not entries; they were left out (and will be asked again)."""


def cache_key(model: str, messages: Sequence[tuple[str, str]], config: Mapping[str, Any]) -> str:
    """SHA-256 over the canonical JSON of everything that determines the judge's answer."""
    payload = {"model": model, "messages": [list(m) for m in messages], "config": dict(config)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class JudgeCache:
    """In-memory map of responses, mirrored to `path` (JSONL, one `{"key", "response"}` per line) if given."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._entries: dict[str, CachedResponse] = {}
        if path is not None and path.exists():
            self._load(path)

    def _load(self, path: Path) -> None:
        """Read the entries of `path`. The cache is derived (every entry can be asked again), so a line that is
        not an entry (a torn write, a corrupted file) is left out with a warning naming the file and the lines,
        never a crash; a file that cannot be read at all is refused by name."""
        bad: list[int] = []
        try:
            with path.open("rb") as handle:
                for number, line, _ in bounded_lines(handle, path, CACHE_LINE):
                    if not line.strip():
                        continue
                    try:
                        row = _CacheRow.model_validate_json(line)
                    except ValidationError:
                        bad.append(number)
                        continue
                    self._entries[row.key] = row.response
        except OSError as exc:
            raise FileReadError(f"{path}: the judge cache cannot be read ({exc.strerror or type(exc).__name__})") from None
        if bad:
            lines = ", ".join(map(str, bad[:5])) + (", ..." if len(bad) > 5 else "")
            warnings.warn(
                f"{path}: left out {len(bad)} line(s) that are not judge cache entries (line {lines}); "
                "those questions are asked again",
                CacheWarning,
                stacklevel=3,
            )

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> CachedResponse | None:
        return self._entries.get(key)

    def put(self, key: str, response: CachedResponse) -> None:
        self._entries[key] = response
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            line = json.dumps({"key": key, "response": response.model_dump()}, ensure_ascii=False)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")
                fh.flush()
                os.fsync(fh.fileno())
