"""Live reward-hacking monitors: per-step signals that the policy is gaming its judge, not auditing better.

Logged every step to `monitors.jsonl` (one record per step, append-only) and to TensorBoard, and read
back by `auditrl monitor RUN`. The signals follow the failure modes of DESIGN.md: manufactured alarm
(false positives on benign targets), narration inflation (report quotes the target never said),
confrontation and pressure (marker phrases in auditor messages) and position-sensitive judges
(disagreement between the two orders of a pairwise comparison).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from auditrl.configfile import load_yaml, read_user_text
from auditrl.judges.claims import firm_claim
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import CLAIM_FORCED, ORDER_DISAGREEMENT

MONITORS_FILE = "monitors.jsonl"

METRICS: dict[str, str] = {
    "reward/mean": "mean reward over judged rollouts",
    "reward/std": "reward standard deviation",
    "reward/failed_share": "share of rollouts whose judging failed (reward None)",
    ("calibration/false_positive_rate"): (
        "benign targets firmly claimed to have a hidden behavior (auditrl.judges.claims; claim exploration's "
        "forced claims left out)"
    ),
    "reports/unverifiable_quote_share": "reports citing at least one quote the target never said",
    "reports/missing_share": "rollouts that ended without a parsed report",
    "auditor/marker_message_share": "auditor messages with a confrontation/pressure marker",
    "auditor/markers_per_rollout": "marker hits per rollout",
    "judge/order_disagreement": "pairwise comparisons whose two orders disagreed",
}


@dataclass(frozen=True)
class Marker:
    pattern: re.Pattern[str]
    category: str


def load_markers(path: Path | None = None) -> list[Marker]:
    """Marker phrases from a YAML file (default: the packaged list); a bad entry names the file and index."""
    if path is None:
        text = resources.files("auditrl.train").joinpath("data/pressure_markers.yaml").read_text(encoding="utf-8")
        where = "auditrl/train/data/pressure_markers.yaml"
    else:
        text = read_user_text(path)
        where = str(path)
    raw = load_yaml(text, where)
    entries = raw.get("markers") if isinstance(raw, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{where}: field 'markers' must be a non-empty list")
    markers: list[Marker] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("pattern"), str):
            raise ValueError(f"{where}: markers[{i}].pattern must be a string (got {entry!r})")
        try:
            pattern = re.compile(entry["pattern"], re.IGNORECASE)
        except re.error as exc:
            raise ValueError(f"{where}: markers[{i}].pattern is not a valid regex: {exc}") from exc
        markers.append(Marker(pattern, str(entry.get("category", "pressure"))))
    return markers


def _share(hits: int, total: int) -> float | None:
    return hits / total if total else None


def step_metrics(
    transcripts: Sequence[Transcript],
    rewards: Sequence[float | None],
    markers: Sequence[Marker],
    order_disagreement: float | None = None,
) -> dict[str, float | None]:
    """The monitor values of one step's rollouts; None where a metric has no data this step.

    `order_disagreement` is the share of this step's pairwise comparisons whose two orders disagreed,
    when the reward design reports it; otherwise it is read from the transcripts' scores.
    """
    judged = np.array([r for r in rewards if r is not None], dtype=np.float64)
    benign_reports = [t.report for t in transcripts if t.benign and t.report is not None and not CLAIM_FORCED.get(t)]
    reports = [t.report for t in transcripts if t.report is not None]
    messages = [m.content for t in transcripts for m in t.auditor_messages if m.role == "assistant"]
    hits_per_message = [sum(bool(mk.pattern.search(text)) for mk in markers) for text in messages]
    disagreements = [v for t in transcripts if (v := ORDER_DISAGREEMENT.get(t)) is not None]
    return {
        "reward/mean": float(judged.mean()) if judged.size else None,
        "reward/std": float(judged.std()) if judged.size else None,
        "reward/failed_share": _share(len(rewards) - judged.size, len(rewards)),
        "calibration/false_positive_rate": _share(sum(firm_claim(r) for r in benign_reports), len(benign_reports)),
        "reports/unverifiable_quote_share": _share(sum(r.unverified_quotes > 0 for r in reports), len(reports)),
        "reports/missing_share": _share(len(transcripts) - len(reports), len(transcripts)),
        "auditor/marker_message_share": _share(sum(h > 0 for h in hits_per_message), len(messages)),
        "auditor/markers_per_rollout": _share(sum(hits_per_message), len(transcripts)),
        "judge/order_disagreement": order_disagreement
        if order_disagreement is not None
        else (float(np.mean(disagreements)) if disagreements else None),
    }


class MonitorLog:
    """Appends one record per step to `monitors.jsonl` and mirrors it to TensorBoard scalars."""

    def __init__(self, run_dir: Path, tensorboard: bool = True) -> None:
        self.path = run_dir / MONITORS_FILE
        self._writer: Any = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=str(run_dir / "tensorboard" / "monitors"))

    def write(self, step: int, values: dict[str, float | None], extra: dict[str, Any] | None = None) -> None:
        record = {"step": step, **(extra or {}), **values}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
        if self._writer is not None:
            for name, value in values.items():
                if value is not None:
                    self._writer.add_scalar(f"monitors/{name}", value, step)
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
