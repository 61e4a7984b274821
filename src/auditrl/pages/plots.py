"""The pages' plots, built as standalone matplotlib Figures on the Agg canvas (no pyplot global state)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Collection, Mapping, Sequence

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from auditrl.evaluate.schema import COMPOSITE
from auditrl.stats import Estimate

NOT_MEASURED = "not measured"
PARTIAL = "partial"
TICK_CHARS = 12
"""Characters per line of a bar group's label: at the figure's width per group, longer lines run into the next."""
LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_QUALITATIVE = ("tab10", "Dark2", "Set1")


def _figure(width: float, height: float) -> Figure:
    """A figure drawn by the Agg canvas, independent of any pyplot backend."""
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def qualitative_colors(n: int) -> list[tuple[float, float, float, float]]:
    """`n` colours from qualitative palettes, so neighbouring categories never get a light/dark pair of one hue.

    tab10 first, then Dark2 and Set1 (tab20 would pair each colour with its pale twin).
    """
    colors: list[tuple[float, float, float, float]] = []
    for name in _QUALITATIVE:
        cmap = matplotlib.colormaps[name]
        colors += [cmap(i) for i in range(cmap.N)]
    return [colors[i % len(colors)] for i in range(n)]


def _legend_below(ax: Axes, n: int, offset: float) -> None:
    """A legend under the axes: it never covers data, and bbox_inches='tight' keeps it in the image."""
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, offset), ncol=min(n, 4), frameon=False)


def metric_bars(
    results: Mapping[str, Mapping[str, Estimate]],
    metrics: Sequence[str] | None = None,
    title: str = "Evaluation suite (95% CI)",
    ylabel: str = "score (0-100)",
    labels: Mapping[str, str] | None = None,
    points: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
    partial: Collection[str] = (),
) -> Figure:
    """Grouped bars, one group per metric and one bar per compared run, with CI error bars.

    `results` maps a run's name to its estimates by metric. A missing or empty estimate is no bar at
    all, marked "not measured" where the bar would stand, so it never reads as a score of 0; a metric
    no run measured says so in its axis label too. Axis labels wrap onto several lines so neighbours
    never overlap. `points` optionally adds individual values (e.g. per-training-seed means) as dots on
    each bar. The legend sits below the axes so it cannot hide a bar. The composite bar of each run in
    `partial` (a composite of only the metrics measured, not comparable with a full one) is hatched and
    marked "partial", and the composite's axis label says so.
    """
    names = list(results)
    metric_names = list(metrics) if metrics is not None else list(dict.fromkeys(m for r in results.values() for m in r))
    fig = _figure(max(6.0, 1.4 * len(metric_names) + 0.4 * len(names)), 4.2)
    ax = fig.add_subplot()
    width = 0.8 / max(len(names), 1)
    x = np.arange(len(metric_names))
    colors = qualitative_colors(len(names))
    measured = {m: False for m in metric_names}
    for i, name in enumerate(names):
        means, lows, highs = [], [], []
        centers = x + (i - (len(names) - 1) / 2) * width
        for j, m in enumerate(metric_names):
            e = results[name].get(m)
            if e is not None and e.n > 0 and not math.isnan(e.mean):
                measured[m] = True
                means.append(e.mean)
                lows.append(e.mean - e.lo)
                highs.append(e.hi - e.mean)
            else:
                means.append(np.nan)
                lows.append(0.0)
                highs.append(0.0)
                ax.text(
                    centers[j], 2.0, NOT_MEASURED, rotation=90, ha="center", va="bottom", fontsize="small", color="0.4"
                )
        bars = ax.bar(centers, means, width, yerr=[lows, highs], capsize=3, label=name, color=colors[i])
        if name in partial and COMPOSITE in metric_names:
            j = metric_names.index(COMPOSITE)
            bars[j].set_hatch("//")
            if not math.isnan(means[j]):
                top = min(means[j] + highs[j] + 1.5, 98.0)
                ax.text(centers[j], top, PARTIAL, rotation=90, ha="center", va="bottom", fontsize="small", color="0.2")
        for j, m in enumerate(metric_names):
            values = list((points or {}).get(name, {}).get(m, []))
            if values:
                spread = np.linspace(-0.25, 0.25, len(values)) * width if len(values) > 1 else np.zeros(1)
                ax.scatter(centers[j] + spread, values, s=9, color="black", zorder=3, linewidths=0)
    ticks = [
        (labels or {}).get(m, m)
        + ("" if measured[m] else f" ({NOT_MEASURED})")
        + (f" ({PARTIAL})" if m == COMPOSITE and measured[m] and any(n in partial for n in names) else "")
        for m in metric_names
    ]
    ax.set_xticks(x, [textwrap.fill(t, TICK_CHARS) for t in ticks])
    ax.set_ylim(0, 105)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    if len(names) > 1:
        _legend_below(
            ax, len(names), -0.1 - 0.045 * max(t.count("\n") for t in (textwrap.fill(t, TICK_CHARS) for t in ticks))
        )
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
    palette = qualitative_colors(len(cats))
    for j, cat in enumerate(cats):
        shares = np.array([distribution[g].get(cat, 0.0) for g in groups])
        color = (colors or {}).get(cat, palette[j])
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
    vlines: Sequence[float] = (),
) -> Figure:
    """Lines of (steps, values) per named series, with an optional shaded (lo, hi) band per series.

    Each series gets its own colour, line style and marker, and the markers of different series sit at
    staggered steps, so a line lying exactly on another stays visible. `vlines` draws dotted vertical
    lines (e.g. reference refreshes). The legend sits below the axes.
    """
    fig = _figure(7.5, 4.0)
    ax = fig.add_subplot()
    colors = qualitative_colors(len(series))
    n = max(len(series), 1)
    for at in vlines:
        ax.axvline(at, color="0.45", linestyle=":", linewidth=1.0, zorder=0)
    for i, (name, (steps, values)) in enumerate(series.items()):
        if len(steps) != len(values):
            raise ValueError(f"series {name!r}: {len(steps)} steps but {len(values)} values")
        every = max(len(steps) // 8, n)  # at least n apart, so each series' markers get their own steps
        (line,) = ax.plot(
            steps, values, label=name, color=colors[i], linestyle=LINESTYLES[i % len(LINESTYLES)],
            marker=MARKERS[i % len(MARKERS)], markersize=5, markevery=(i * every // n, every), linewidth=1.6,
        )  # fmt: skip
        if bands and name in bands:
            lo, hi = bands[name]
            ax.fill_between(steps, lo, hi, alpha=0.2, color=line.get_color())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if len(series) > 1:
        _legend_below(ax, len(series), -0.14)
    return fig


def heatmap(
    values: Sequence[Sequence[float]],
    x_ticks: Sequence[float],
    y_ticks: Sequence[float],
    title: str,
    xlabel: str,
    ylabel: str,
    vmin: float = 0.0,
    vmax: float = 100.0,
    marked: Sequence[Sequence[bool]] | None = None,
) -> Figure:
    """A grid of scores (rows follow `y_ticks`, columns `x_ticks`), each cell annotated with its value.

    `marked` cells are outlined (e.g. where a design fell below a baseline).
    """
    grid = np.asarray(values, dtype=np.float64)
    fig = _figure(1.2 + 1.1 * len(x_ticks), 1.0 + 0.8 * len(y_ticks))
    ax = fig.add_subplot()
    image = ax.imshow(grid, origin="lower", cmap="viridis", vmin=vmin, vmax=vmax, aspect="auto")
    for (i, j), v in np.ndenumerate(grid):
        ax.text(j, i, "-" if math.isnan(v) else f"{v:.0f}", ha="center", va="center", fontsize="small",
                color="white" if v < (vmin + vmax) / 2 else "black")  # fmt: skip
        if marked is not None and marked[i][j]:
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
    ax.set_xticks(range(len(x_ticks)), [f"{x:g}" for x in x_ticks])
    ax.set_yticks(range(len(y_ticks)), [f"{y:g}" for y in y_ticks])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize="medium")
    fig.colorbar(image, ax=ax)
    return fig
