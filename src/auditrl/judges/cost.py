"""Judge calls and tokens, counted per label (a reward design's name), so designs can be compared on cost."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from pydantic import BaseModel
from rich.table import Table

from auditrl.terminal import keep_whole

UNATTRIBUTED = "unattributed"
_current_label: ContextVar[str] = ContextVar("auditrl_cost_label", default=UNATTRIBUTED)


@contextmanager
def attribute_cost(label: str) -> Iterator[None]:
    """Count every judge call made inside this block (including in tasks it spawns) under `label`."""
    token = _current_label.set(label)
    try:
        yield
    finally:
        _current_label.reset(token)


class CostStats(BaseModel):
    calls: int = 0
    cache_hits: int = 0
    failed_calls: int = 0
    retries: int = 0
    abstains: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: CostStats) -> CostStats:
        return CostStats(**{k: getattr(self, k) + getattr(other, k) for k in CostStats.model_fields})


class CostMeter:
    """Accumulates judge usage; `calls` are real model calls, `cache_hits` are answers served from cache."""

    def __init__(self) -> None:
        self.stats: dict[str, CostStats] = {}

    def _bucket(self) -> CostStats:
        return self.stats.setdefault(_current_label.get(), CostStats())

    def record_call(self, input_tokens: int, output_tokens: int) -> None:
        s = self._bucket()
        s.calls += 1
        s.input_tokens += input_tokens
        s.output_tokens += output_tokens

    def record_cache_hit(self) -> None:
        self._bucket().cache_hits += 1

    def record_failed_call(self) -> None:
        self._bucket().failed_calls += 1

    def record_retry(self) -> None:
        self._bucket().retries += 1

    def record_abstain(self) -> None:
        self._bucket().abstains += 1

    def get(self, label: str) -> CostStats:
        return self.stats.get(label, CostStats())

    def total(self) -> CostStats:
        out = CostStats()
        for s in self.stats.values():
            out = out.add(s)
        return out

    def table(self, title: str = "Judge cost") -> Table:
        table = Table(title=title)
        for column in ("design", "calls", "cache hits", "retries", "failed", "abstains", "input tok", "output tok"):
            table.add_column(column, justify="left" if column == "design" else "right")
        for label, s in sorted(self.stats.items()):
            table.add_row(
                label,
                *map(
                    str, (s.calls, s.cache_hits, s.retries, s.failed_calls, s.abstains, s.input_tokens, s.output_tokens)
                ),
            )
        return keep_whole(table, "design")
