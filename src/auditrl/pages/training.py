"""The page of a `grpo_lm` training run: the per-step reward with its interval and a moving average, and, where a
benchmark evaluated the trained auditor, its held-out table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from auditrl.analysis.monitors import read_monitors
from auditrl.pages.html import Section, TableBlock, write_page
from auditrl.pages.plots import training_curves
from auditrl.train.config import GRPOLMConfig
from auditrl.train.outputs import PAGE_FILE

SMOOTHING = 5
"""Steps in the moving average drawn over the per-step mean reward."""


def reward_section(records: Sequence[Mapping[str, Any]]) -> Section:
    """The per-step mean reward with its 95% interval over the step's rollouts, and a moving average."""
    scored = [r for r in records if r.get("reward/mean") is not None]
    steps = [int(r["step"]) for r in scored]
    means = [float(r["reward/mean"]) for r in scored]
    half = [1.96 * float(r.get("reward/std") or 0.0) / max(int(r.get("rollouts") or 1), 1) ** 0.5 for r in scored]
    windows = [means[max(0, i - SMOOTHING + 1) : i + 1] for i in range(len(means))]
    smooth = [sum(w) / len(w) for w in windows]
    series = {"mean reward per step": (steps, means), f"moving average ({SMOOTHING} steps)": (steps, smooth)}
    bands = {
        "mean reward per step": (
            [m - h for m, h in zip(means, half, strict=True)],
            [m + h for m, h in zip(means, half, strict=True)],
        )
    }
    figure = training_curves(series, title="Reward during training", bands=bands)
    fp = [
        (int(r["step"]), r["calibration/false_positive_rate"])
        for r in records
        if r.get("calibration/false_positive_rate") is not None
    ]
    rows: list[list[str | int | float | None]] = []
    third = max(len(means) // 3, 1)
    if means:
        rows.append(["first third of steps", f"{sum(means[:third]) / third:.3f}"])
        rows.append(["last third of steps", f"{sum(means[-third:]) / third:.3f}"])
    if fp:
        rows.append(["benign groups reported as planted (last step)", f"{fp[-1][1]:.2f}"])
    paragraphs = [
        (
            f"{len(steps)} steps. The shaded band is the 95% interval of each step's mean over its rollouts; a "
            "reference-pairwise reward of 0.5 means a rollout tied the reference transcript of its (behavior, "
            "seed)."
        )
    ]
    return Section(
        title="Training reward",
        paragraphs=paragraphs,
        tables=[
            TableBlock(header=["", "mean reward"], rows=rows, caption="per-step means averaged over the steps named")
        ],
        figures=[figure],
    )


def evaluation_section(evaluation: Mapping[str, Any]) -> Section:
    """The before/after held-out table written by benchmarks/cpu_learn.py."""
    rows: list[list[str | int | float | None]] = []
    for metric, entry in evaluation["metrics"].items():
        cells = [
            f"{e['mean']:.1f} [{e['lo']:.1f}, {e['hi']:.1f}]" if (e := entry.get(k)) else "-"
            for k in ("base", "trained")
        ]
        diff = entry.get("difference")
        rows.append([metric, *cells, f"{diff['mean']:+.1f} [{diff['lo']:+.1f}, {diff['hi']:+.1f}]" if diff else "-"])
    tables = [TableBlock(header=["metric", "base", "trained", "trained - base"], rows=rows)]
    if thirds := evaluation.get("training"):
        pct = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
        tables.append(
            TableBlock(
                header=[
                    "training steps",
                    "rollouts",
                    "valid tool calls",
                    "valid reports",
                    "benign: nothing found",
                    "reward",
                ],
                rows=[
                    [
                        t["steps"],
                        t["rollouts"],
                        pct(t["valid_tool_calls"]),
                        pct(t["valid_reports"]),
                        pct(t["benign_nothing_found"]),
                        "-" if (r := t["reward"]) is None else f"{r['mean']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]",
                    ]
                    for t in thirds
                ],
            )
        )
    return Section(
        title="Held-out evaluation: base vs trained",
        paragraphs=[
            (
                f"Held-out behaviors x {evaluation['seeds_per_behavior']} seed(s) x {evaluation['rollouts']} "
                "rollout(s), planted and benign, with the training episode settings; 0-100, mean [95% CI] over "
                "(behavior, seed) units; the difference's interval is a percentile bootstrap over the units. The "
                "second table is what the policy sampled during training, by third of the run (reward 0-1, "
                "bootstrap interval over rollouts)."
            )
        ],
        tables=tables,
    )


def write_training_page(run_dir: Path, cfg: GRPOLMConfig, evaluation: Mapping[str, Any] | None = None) -> Path:
    sections = [reward_section(read_monitors(run_dir))]
    if evaluation is not None:
        sections.append(evaluation_section(evaluation))
    return write_page(run_dir / PAGE_FILE, f"auditrl training run: {cfg.name}", sections)
