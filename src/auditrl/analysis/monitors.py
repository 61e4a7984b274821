"""Reading a `grpo_lm` run's monitor log: its records in step order and a terminal table of each monitor's trend."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from auditrl.train.monitors import METRICS, MONITORS_FILE


def read_monitors(run_dir: Path) -> list[dict[str, Any]]:
    """Monitor records of a run, in step order (a torn last line from a crash is skipped)."""
    path = run_dir / MONITORS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no monitor log (is {run_dir} a grpo_lm run directory?)")
    records: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return sorted(records, key=lambda r: r["step"])


_BARS = "▁▂▃▄▅▆▇█"


def _sparkline(values: Sequence[float]) -> str:
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = hi - lo or 1.0
    return "".join(_BARS[min(len(_BARS) - 1, int((v - lo) / span * (len(_BARS) - 1) + 0.5))] for v in values)


def _fmt(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def monitor_table(records: Sequence[dict[str, Any]], window: int = 5, spark: int = 30, meanings: bool = True) -> Table:
    """Latest value, the mean of the last `window` steps against the window before, and a sparkline."""
    last_step = records[-1]["step"] if records else "-"
    table = Table(title=f"reward-hacking monitors ({len(records)} steps, latest step {last_step})")
    table.add_column("metric", no_wrap=True)
    for column in ("latest", f"last {window}", f"prev {window}"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("trend", no_wrap=True)
    if meanings:
        table.add_column("meaning")
    for name, meaning in METRICS.items():
        series = [float(r[name]) for r in records if r.get(name) is not None]
        recent = series[-window:]
        before = series[-2 * window : -window]
        cells = [
            name,
            _fmt(series[-1] if series else None),
            _fmt(float(np.mean(recent)) if recent else None),
            _fmt(float(np.mean(before)) if before else None),
            _sparkline(series[-spark:]),
        ]
        table.add_row(*cells, *([meaning] if meanings else []))
    return table
