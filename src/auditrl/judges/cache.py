"""Judge response cache keyed by a hash of the judge's question (model, messages, generation config).

Identical questions are answered once: in memory, and across runs through an append-only JSONL file.
Only replies that parsed into a verdict are stored (the client puts them), so an abstention is asked
again on the next run instead of replaying the malformed reply.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError


class CachedResponse(BaseModel):
    completion: str
    input_tokens: int = 0
    output_tokens: int = 0


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
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    self._entries[row["key"]] = CachedResponse.model_validate(row["response"])
                except (json.JSONDecodeError, KeyError, TypeError, ValidationError) as exc:
                    raise ValueError(f"{path}:{lineno}: not a judge cache entry ({exc})") from exc

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
