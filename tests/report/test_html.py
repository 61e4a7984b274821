import base64
import re
from pathlib import Path

import pytest

from auditrl.evaluate.stats import Estimate
from auditrl.report.html import Section, TableBlock, write_report
from auditrl.report.plots import metric_bars, strategy_distribution_bars, training_curves

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
        Section(title="Training", figures=[training_curves({"reward": ([0, 1, 2], [0.1, 0.2, 0.4])}, bands={"reward": ([0, 0.1, 0.3], [0.2, 0.3, 0.5])})]),
    ]
    path = write_report(tmp_path / "sub" / "report.html", f"Title {EVIL}", sections)
    html = path.read_text(encoding="utf-8")
    assert "<script" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert "&amp; more" in html and "1.235" in html and "<td>-</td>" in html
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
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y"]
    assert ax.get_legend() is not None


def test_training_curves_reject_ragged_series() -> None:
    with pytest.raises(ValueError, match="3 steps but 2 values"):
        training_curves({"r": ([1, 2, 3], [0.1, 0.2])})
