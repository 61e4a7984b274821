import base64
import itertools
import math
import re
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.colors import rgb_to_hsv, to_rgb

from auditrl.pages.html import FigureBlock, Section, TableBlock, render_page, write_page
from auditrl.pages.plots import metric_bars, qualitative_colors, strategy_distribution_bars, training_curves
from auditrl.stats import Estimate

EVIL = '<script>alert("x")</script>'


def test_report_escapes_model_text_and_embeds_figures(tmp_path: Path) -> None:
    est = {"a": {"audit_quality": Estimate(mean=60, lo=50, hi=70, n=9), "realism": Estimate(mean=10, lo=5, hi=15, n=9)}}
    sections = [
        Section(
            title=f"Results {EVIL}",
            paragraphs=[f"the target said {EVIL} & more"],
            tables=[TableBlock(header=["model", EVIL], rows=[[EVIL, 1.23456], ["b", None]], caption=EVIL)],
            figures=[metric_bars(est), strategy_distribution_bars({"a": {"x": 0.25, "y": 0.75}})],
            preformatted=[f"TARGET: {EVIL}\n  indented"],
        ),
        Section(
            title="Training",
            figures=[
                training_curves(
                    {"reward": ([0, 1, 2], [0.1, 0.2, 0.4])}, bands={"reward": ([0, 0.1, 0.3], [0.2, 0.3, 0.5])}
                )
            ],
        ),
    ]
    path = write_page(tmp_path / "sub" / "report.html", f"Title {EVIL}", sections)
    html = path.read_text(encoding="utf-8")
    assert "<script" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert "&amp; more" in html and "1.235" in html and '<td class="short">-</td>' in html
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(images) == 3
    assert all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    assert "http" not in html.split("<body>")[0]  # self-contained: no external stylesheet or script
    assert [p.name for p in path.parent.iterdir()] == ["report.html"]  # no temporary file left


def test_table_rows_must_match_header() -> None:
    with pytest.raises(ValueError, match="row 0 has 1 cells"):
        TableBlock(header=["a", "b"], rows=[["only"]])


def test_metric_bars_leave_gaps_for_missing_metrics() -> None:
    fig = metric_bars({"a": {"x": Estimate(mean=5, lo=4, hi=6, n=3)}, "b": {}}, metrics=["x", "y"])
    ax = fig.axes[0]
    assert [t.get_text().replace("\n", " ") for t in ax.get_xticklabels()] == ["x", "y (not measured)"]
    assert ax.get_legend() is not None


def test_training_curves_reject_ragged_series() -> None:
    with pytest.raises(ValueError, match="3 steps but 2 values"):
        training_curves({"r": ([1, 2, 3], [0.1, 0.2])})


def test_wide_tables_scroll_in_their_own_container_and_short_cells_do_not_wrap() -> None:
    header = [f"column {i}" for i in range(14)]
    html = render_page(
        "t", [Section(title="s", tables=[TableBlock(header=header, rows=[["76.0 [75.7,76.4]"] + ["x" * 200] * 13])])]
    )
    assert '<div class="table-wrap">\n<table>' in html and "</table>\n</div>" in html
    assert ".table-wrap { max-width: 100%; overflow-x: auto;" in html
    assert '<td class="short">76.0 [75.7,76.4]</td>' in html and "<td>" + "x" * 200 + "</td>" in html


def test_figure_blocks_carry_a_caption_under_the_title() -> None:
    fig = training_curves({"a": ([0, 1], [0.5, 0.5])}, title="Training reward")
    html = render_page("t", [Section(title="s", figures=[FigureBlock(fig, "flat by construction <b>")])])
    assert "<figcaption><strong>Training reward</strong>. flat by construction &lt;b&gt;</figcaption>" in html


def _window(artist: object, fig: object) -> object:
    fig.canvas.draw()  # type: ignore[attr-defined]
    return artist.get_window_extent()  # type: ignore[attr-defined]


def test_metric_bars_legend_sits_below_the_bars_and_points_are_drawn() -> None:
    est = {n: {"a": Estimate(mean=95, lo=90, hi=99, n=9), "b": Estimate(mean=90, lo=85, hi=95, n=9)} for n in "pqrstuv"}
    fig = metric_bars(est, points={"p": {"a": [94.0, 95.0, 96.0]}})
    ax = fig.axes[0]
    legend, axes = _window(ax.get_legend(), fig), _window(ax, fig)
    assert legend.y1 <= axes.y0  # entirely under the axes: it cannot cover a bar
    dots = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(dots) == 1 and len(dots[0].get_offsets()) == 3
    colors = [to_rgb(c) for c in {tuple(p.get_facecolor()) for p in ax.patches}]
    assert len(colors) == 7


def test_training_curves_tell_overlapping_series_apart() -> None:
    steps = list(range(100))
    series = {n: (steps, [1.0] * 100) for n in ("concerningness", "binary", "ingroup", "reference")}
    fig = training_curves(series, vlines=[50])
    ax = fig.axes[0]
    lines = [line for line in ax.get_lines() if line.get_label() in series]
    assert len({line.get_linestyle() for line in lines}) == 4 and len({line.get_marker() for line in lines}) == 4
    marked = [set(range(*line.get_markevery()[0:1], 100, line.get_markevery()[1])) for line in lines]
    assert all(not (a & b) for a, b in combinations(marked, 2))  # markers at different steps stay visible
    assert any(line.get_xdata()[0] == 50 and line.get_linestyle() == ":" for line in ax.get_lines())
    legend, axes = _window(ax.get_legend(), fig), _window(ax, fig)
    assert legend.y1 <= axes.y0


def _hue_gap(a: np.ndarray, b: np.ndarray) -> float:
    d = abs(float(a[0] - b[0]))
    return min(d, 1.0 - d)


def test_category_colours_are_clearly_distinct() -> None:
    """tab20 came in dark/pale pairs of one hue; the strategy categories now differ in hue."""
    fig = strategy_distribution_bars({"g": {c: 0.2 for c in "abcde"}, "h": {c: 0.2 for c in "abcde"}})
    faces = list(dict.fromkeys(tuple(p.get_facecolor()[:3]) for p in fig.axes[0].patches))
    assert len(faces) == 5
    hsv = rgb_to_hsv(np.array(faces))
    assert min(_hue_gap(a, b) for a, b in combinations(hsv, 2)) > 0.05
    assert len({to_rgb(c) for c in qualitative_colors(20)}) == 20


SUITE_TITLES = {"audit_quality": "Audit quality", "false_positive": "FP calibration",
                "production": "Production discovery", "realism": "Realism", "composite": "Composite"}  # fmt: skip


@pytest.mark.parametrize("runs", [1, 3])
def test_metric_bar_labels_do_not_overlap_each_other_or_the_legend(runs: int) -> None:
    """ "FP calibration" ran into "Production discovery" under the suite's bars."""
    est = {f"auditor/{i}": {m: Estimate(mean=50, lo=40, hi=60, n=9) for m in SUITE_TITLES} for i in range(runs)}
    fig = metric_bars(est, metrics=list(SUITE_TITLES), labels=SUITE_TITLES)
    ax = fig.axes[0]
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in ax.get_xticklabels()]
    assert all(a.x1 < b.x0 for a, b in itertools.pairwise(boxes)), [t.get_text() for t in ax.get_xticklabels()]
    if runs > 1:
        assert _window(ax.get_legend(), fig).y1 < min(b.y0 for b in boxes)


def test_an_unmeasured_metric_is_marked_as_missing_not_drawn_as_zero() -> None:
    est = {"a": {"audit_quality": Estimate(mean=30, lo=20, hi=40, n=9), "realism": Estimate(mean=10, lo=5, hi=15, n=9)},
           "b": {"audit_quality": Estimate(mean=20, lo=10, hi=30, n=9)}}  # fmt: skip
    fig = metric_bars(est, metrics=["audit_quality", "production", "realism"], labels=SUITE_TITLES)
    ax = fig.axes[0]
    ticks = [t.get_text().replace("\n", " ") for t in ax.get_xticklabels()]
    assert ticks == ["Audit quality", "Production discovery (not measured)", "Realism"]
    marks = sorted(round(float(t.get_position()[0]), 2) for t in ax.texts if t.get_text() == "not measured")
    assert marks == [0.8, 1.2, 2.2]  # both bars of production, and b's realism bar, each where its bar would stand
    heights = {round(p.get_x() + p.get_width() / 2, 2): p.get_height() for p in ax.patches}
    assert all(math.isnan(heights[m]) for m in marks)  # no bar there, not a bar of height 0


def test_a_partial_composite_is_hatched_and_marked_partial_in_the_chart() -> None:
    full = {"audit_quality": Estimate(mean=60, lo=50, hi=70, n=9), "composite": Estimate(mean=55, lo=45, hi=65, n=9)}
    est = {"full": full, "fp only": {"composite": Estimate(mean=50, lo=0, hi=100, n=2)}}
    fig = metric_bars(est, metrics=["audit_quality", "composite"], labels=SUITE_TITLES, partial=["fp only"])
    ax = fig.axes[0]
    assert [t.get_text().replace("\n", " ") for t in ax.get_xticklabels()] == ["Audit quality", "Composite (partial)"]
    marks = [round(float(t.get_position()[0]), 2) for t in ax.texts if t.get_text() == "partial"]
    hatched = [round(p.get_x() + p.get_width() / 2, 2) for p in ax.patches if p.get_hatch()]
    assert marks == hatched == [1.2]  # the partial run's composite bar only, not the full run's beside it
    whole = metric_bars(est, metrics=["audit_quality", "composite"], labels=SUITE_TITLES)
    assert not [t for t in whole.axes[0].texts if t.get_text() == "partial"]


def test_the_suite_section_passes_its_partial_composites_to_the_chart() -> None:
    from auditrl.evaluate.schema import MetricResult, SuiteResult
    from auditrl.pages.sections import suite_section

    fp = MetricResult(estimate=Estimate(mean=50, lo=0, hi=100, n=2), transcripts=2)
    result = SuiteResult(label="fp only", false_positive=fp, composite=Estimate(mean=50, lo=0, hi=100, n=2))
    (block,) = suite_section([result]).figures
    assert isinstance(block, FigureBlock)
    assert any(t.get_text() == "partial" for t in block.figure.axes[0].texts)
