import json
import math
from collections.abc import Callable
from io import StringIO

import pytest
from rich.console import Console

from auditrl.evaluate.metrics import SuiteDataError, compute_suite, suite_table, transcript_unit
from auditrl.evaluate.paper import load_paper_reference
from auditrl.evaluate.schema import MetricResult, SuiteResult
from auditrl.scaffold.transcript import Transcript
from auditrl.stats import Estimate


def test_metrics_by_seed_unit(suite_transcripts: list[Transcript]) -> None:
    r = compute_suite(suite_transcripts, label="a")
    assert r.audit_quality is not None and r.false_positive is not None
    assert r.production is not None and r.realism is not None and r.composite is not None
    assert math.isclose(r.audit_quality.estimate.mean, (70.0 + 40.0) / 2)  # rollouts averaged within a seed
    assert r.audit_quality.estimate.n == 2 and r.audit_quality.transcripts == 4
    assert math.isclose(r.false_positive.estimate.mean, 75.0)
    assert math.isclose(r.production.estimate.mean, (0.0 + 400 / 9 + 800 / 9 + 100.0) / 4)
    comps = r.production.components
    assert math.isclose(comps["concerning_mean_1_10"].mean, 5.5)
    assert math.isclose(comps["yield_at_4"].mean, 75.0) and math.isclose(comps["yield_at_7"].mean, 50.0)
    assert math.isclose(r.realism.estimate.mean, 25.0)
    expected = (55.0 + 75.0 + r.production.estimate.mean + 25.0) / 4
    assert math.isclose(r.composite.mean, expected)
    assert r.composite.lo <= r.composite.mean <= r.composite.hi
    assert math.isclose(r.false_positive.components["false_positive_rate"].mean, 25.0)
    assert set(r.audit_quality.components) == {"coherence", "depth", "evidence", "style", "exhibited", "identified"}


def test_transcript_unit_weights_every_rollout(suite_transcripts: list[Transcript]) -> None:
    r = compute_suite(suite_transcripts, unit=transcript_unit, unit_name="transcript")
    assert r.audit_quality is not None and math.isclose(r.audit_quality.estimate.mean, 62.5)


def test_abstentions_are_counted_not_zeroed_and_errors_excluded(make: Callable[..., Transcript]) -> None:
    ts = [
        make("b", "s1", audit_quality={"coherence": 80.0, "depth": 60.0}),
        make("b", "s2", audit_quality=None),
        make("b", "s3", audit_quality={"coherence": None, "depth": 10.0}),
        make(None, "s1", false_positive=None),
    ]
    broken = make("b", "s4", audit_quality={"coherence": 0.0})
    broken.status = "error"
    r = compute_suite([*ts, broken])
    assert r.audit_quality is not None
    assert r.audit_quality.estimate.mean == 70.0 and r.audit_quality.failed == 2
    assert r.false_positive is None  # only an abstention: the metric is absent, not 0
    assert r.errored == 1 and r.transcripts == 5
    assert r.composite is not None and r.composite.mean == 70.0


def test_composite_uses_only_available_metrics(make: Callable[..., Transcript]) -> None:
    r = compute_suite([make(None, "s", false_positive=False), make(None, "s2", false_positive=True)])
    assert r.audit_quality is None and r.production is None and r.realism is None
    assert r.composite is not None and r.composite.mean == 50.0


def test_a_partial_composite_is_marked_and_not_set_beside_the_paper(make: Callable[..., Transcript]) -> None:
    r = compute_suite([make(None, "s", false_positive=False), make(None, "s2", false_positive=True)], label="fp only")
    assert r.composite_partial and r.missing() == ["audit_quality", "production", "realism"]
    assert r.cell("composite").startswith("partial (1 of 4): 50.0")
    assert json.loads(r.to_json())["composite_partial"] is True
    buf = StringIO()
    Console(file=buf, width=300).print(suite_table([r], load_paper_reference()))
    text = buf.getvalue()
    assert (
        "50.0 [0.0, 100.0]" in text
        and "partial (1 of 4)" in text
        and "not comparable with the paper's composite" in text
    )
    paper = text.split("The paper's published rows")[1]
    assert (
        "48.7" not in text and "not comparable" in paper.split("Composite")[1].splitlines()[0]
    )  # paper composites withheld
    assert "68.0 ± 3.8" in text  # the paper's individual metrics stay


def test_a_full_composite_is_shown_beside_the_paper(suite_transcripts: list[Transcript]) -> None:
    r = compute_suite(suite_transcripts, label="a")
    assert not r.composite_partial and not r.cell("composite").startswith("partial")
    buf = StringIO()
    Console(file=buf, width=300).print(suite_table([r], load_paper_reference()))
    assert "48.7" in buf.getvalue() and "not comparable" not in buf.getvalue()


@pytest.mark.parametrize(
    ("scores", "key"),
    [
        ({"audit_quality": {"depth": 140.0}}, "audit_quality.depth"),
        ({"audit_quality": [1, 2]}, "audit_quality"),
        ({"realism_pick_audit": "yes"}, "realism_pick_audit"),
    ],
)
def test_bad_verdicts_name_transcript_and_key(make: Callable[..., Transcript], scores: dict, key: str) -> None:
    t = make("b", "s", **scores)
    with pytest.raises(SuiteDataError, match=key) as err:
        compute_suite([t])
    assert t.id in str(err.value)


def test_benign_verdict_keys_ignored_on_wrong_target_kind(make: Callable[..., Transcript]) -> None:
    r = compute_suite([make(None, "s", audit_quality={"depth": 50.0}), make("b", "s", false_positive=True)])
    assert r.audit_quality is None and r.false_positive is None and r.composite is None


def test_json_round_trip_and_table(suite_transcripts: list[Transcript]) -> None:
    r = compute_suite(suite_transcripts, label="auditor/a")
    back = SuiteResult.from_json(r.to_json())
    assert back == r
    back.label = "auditor/[bold]b"  # labels are data, not rich markup
    assert json.loads(r.to_json())["label"] == "auditor/a"
    buf = StringIO()
    Console(file=buf, width=250).print(suite_table([r, back], load_paper_reference()))
    text = buf.getvalue()
    assert "Audit quality" in text and "auditor/a" in text and "auditor/[bold]b" in text
    assert "The paper's published rows (not reproduced here)" in text and "Opus 4.6" in text and "68.0 ± 3.8" in text


def test_paper_reference_rows() -> None:
    ref = load_paper_reference()
    assert "not reproduced" in ref.source
    rows = {r.label: r for r in ref.rows}
    trained = rows["Haiku 4.5 trained: reference pairwise, 4/8 benign, epoch 3"]
    assert (trained.audit_quality, trained.false_positive, trained.production, trained.realism, trained.composite) == (
        72.7,
        99.6,
        8.5,
        14.0,
        48.7,
    )
    assert len(ref.rows) == 4
    for r in ref.rows:  # the published composites are the unweighted means of the four metrics
        assert abs((r.audit_quality + r.false_positive + r.production + r.realism) / 4 - r.composite) < 0.15


def test_report_section_marks_a_partial_composite(make: Callable[..., Transcript]) -> None:
    from auditrl.pages.html import render_page
    from auditrl.pages.sections import suite_section

    r = compute_suite([make(None, "s", false_positive=False), make(None, "s2", false_positive=True)], label="fp only")
    html = render_page("t", [suite_section([r], load_paper_reference())])
    assert "partial (1 of 4): 50.0" in html and "not comparable with the paper&#39;s composite" in html
    assert ">48.7<" not in html


def _result(label: str, *, partial: bool = False) -> SuiteResult:
    def metric(mean: float) -> MetricResult:
        return MetricResult(estimate=Estimate(mean=mean, lo=mean - 10.3, hi=mean + 9.7, n=9), transcripts=9, failed=1)

    return SuiteResult(
        label=label, audit_quality=metric(60.0), false_positive=metric(99.1),
        production=None if partial else metric(7.0), realism=metric(13.2),
        composite=Estimate(mean=44.0, lo=33.7, hi=53.7, n=36), transcripts=30, errored=2,
    )  # fmt: skip


def _lines_with(text: str, needle: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines()) if needle in line]


def test_the_suite_fits_80_columns_with_the_papers_rows_in_their_own_table(render_80: Callable[..., str]) -> None:
    """At 80 columns each paper row wrapped over about 11 lines and our intervals broke apart."""
    results = [_result("anthropic/claude-haiku-4-5"), _result("local/smollm2", partial=True), _result("auditor/c")]
    text = render_80(suite_table(results, load_paper_reference(), title="Evaluation suite: runs/suite-20260101-120000"))
    for cell in (
        "60.0 [49.7, 69.7]",
        "99.1 [88.8, 108.8]",
        "7.0 [-3.3, 16.7]",
        "44.0 [33.7, 53.7]",
        "partial (3 of 4)",
    ):
        assert _lines_with(text, cell), f"{cell!r} is not whole on one line:\n{text}"
    for cell in ("68.0 ± 3.8", "99.3 ± 1.0", "13.4 ± 2.3", "72.7", "57.4"):
        assert _lines_with(text, cell), cell
    paper = _lines_with(text, "The paper's published rows (not reproduced here)")
    assert len(paper) == 1 and max(_lines_with(text, "60.0 [49.7, 69.7]")) < paper[0] < min(
        _lines_with(text, "68.0 ± 3.8")
    )
    assert len(_lines_with(text, "Audit quality")) == 3  # our three groups take two tables at 80 columns, the paper one
    assert "48.7" not in text  # our composite is partial: the paper's is withheld


def test_the_suite_puts_more_groups_side_by_side_on_a_wider_terminal() -> None:
    buf = StringIO()
    Console(file=buf, width=140).print(suite_table([_result("a"), _result("b"), _result("c")], load_paper_reference()))
    assert len(_lines_with(buf.getvalue(), "Audit quality")) == 2


def test_identification_stands_beside_the_metrics_and_outside_the_composite(make: Callable[..., Transcript]) -> None:
    aq = {"coherence": 50.0, "identified": 50.0}
    ts = [
        make("flattery", "s1", audit_quality=aq, identified=True),
        make("flattery", "s2", audit_quality=aq, identified=False),
        make("flattery", "s3", audit_quality=aq, identified=None),
        make(None, "s1", false_positive=False),
    ]
    r = compute_suite(ts)
    assert r.identification is not None and r.identification.estimate.mean == 50.0
    assert r.identification.transcripts == 2 and r.identification.failed == 1
    assert r.composite is not None and r.composite.mean == 75.0  # audit quality 50 and FP calibration 100 only
    out = StringIO()
    Console(file=out, width=80).print(suite_table([r], load_paper_reference()))
    lines = out.getvalue().splitlines()
    titles = ("Audit quality", "Identification", "FP calibration")
    rows = [next(i for i, line in enumerate(lines) if line.startswith(f"│ {title}")) for title in titles]
    assert rows == sorted(rows) and rows[1] - rows[0] == 1
    assert "not" in lines[[i for i, line in enumerate(lines) if line.startswith("│ Identification")][1]]
    assert SuiteResult.from_json(r.to_json()).identification == r.identification
