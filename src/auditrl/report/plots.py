"""The report's plots, built as standalone matplotlib Figures on the Agg canvas (no pyplot global state)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from auditrl.evaluate.stats import Estimate


def _figure(width: float, height: float) -> Figure:
    """A figure drawn by the Agg canvas, independent of any pyplot backend."""
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def metric_bars(
    results: Mapping[str, Mapping[str, Estimate]],
    metrics: Sequence[str] | None = None,
    title: str = "Evaluation suite (95% CI)",
    ylabel: str = "score (0-100)",
    labels: Mapping[str, str] | None = None,
) -> Figure:
    """Grouped bars, one group per metric and one bar per compared run, with CI error bars.

    `results` maps a run's name to its estimates by metric; a missing or empty estimate leaves a gap.
    """
    names = list(results)
    metric_names = list(metrics) if metrics is not None else list(dict.fromkeys(m for r in results.values() for m in r))
    fig = _figure(max(6.0, 1.4 * len(metric_names) + 0.4 * len(names)), 4.2)
    ax = fig.add_subplot()
    width = 0.8 / max(len(names), 1)
    x = np.arange(len(metric_names))
    for i, name in enumerate(names):
        means, lows, highs = [], [], []
        for m in metric_names:
            e = results[name].get(m)
            ok = e is not None and e.n > 0 and not math.isnan(e.mean)
            means.append(e.mean if ok else np.nan)
            lows.append(e.mean - e.lo if ok else 0.0)
            highs.append(e.hi - e.mean if ok else 0.0)
        ax.bar(x + (i - (len(names) - 1) / 2) * width, means, width, yerr=[lows, highs], capsize=3, label=name)
    ax.set_xticks(x, [(labels or {}).get(m, m) for m in metric_names])
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    if len(names) > 1:
        ax.legend(fontsize="small", loc="best")
    return fig


def strategy_distribution_bars(
    distribution: Mapping[str, Mapping[str, float]],
    order: Sequence[str] | None = None,
    title: str = "Strategy distribution",
    colors: Mapping[str, str] | None = None,
) -> Figure:
    """Horizontal stacked bars: one bar per group, segments = shares of each strategy (summing to 1)."""
    groups = list(distribution)
    cats = list(order) if order is not None else list(dict.fromkeys(c for d in distribution.values() for c in d))
    fig = _figure(9.0, 1.2 + 0.5 * max(len(groups), 1))
    ax = fig.add_subplot()
    left = np.zeros(len(groups))
    palette = matplotlib.colormaps["tab20"]
    for j, cat in enumerate(cats):
        shares = np.array([distribution[g].get(cat, 0.0) for g in groups])
        color = (colors or {}).get(cat, palette(j % 20))
        ax.barh(groups, shares, left=left, label=cat, color=color)
        left += shares
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of transcripts")
    ax.set_title(title)
    ax.invert_yaxis()
    ax.legend(fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2, frameon=False)
    return fig


def training_curves(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    title: str = "Training",
    xlabel: str = "step",
    ylabel: str = "reward",
    bands: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
) -> Figure:
    """Lines of (steps, values) per named series, with an optional shaded (lo, hi) band per series."""
    fig = _figure(7.5, 4.0)
    ax = fig.add_subplot()
    for name, (steps, values) in series.items():
        if len(steps) != len(values):
            raise ValueError(f"series {name!r}: {len(steps)} steps but {len(values)} values")
        (line,) = ax.plot(steps, values, label=name)
        if bands and name in bands:
            lo, hi = bands[name]
            ax.fill_between(steps, lo, hi, alpha=0.2, color=line.get_color())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize="small")
    return fig
