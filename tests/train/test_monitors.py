"""Reward-hacking monitors: hand-checked values, JSONL + TensorBoard logs, the monitor table."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from auditrl.analysis.monitors import monitor_table, read_monitors
from auditrl.scaffold.transcript import AuditorMessage, Prediction, QuoteCheck, Report, Transcript
from auditrl.scaffold.transcript_keys import CLAIM_FORCED, ORDER_DISAGREEMENT
from auditrl.train.monitors import MonitorLog, load_markers, step_metrics


def _t(benign: bool, report: Report | None, says: str, **scores: float) -> Transcript:
    return Transcript(
        auditor_model="a",
        target_model="t",
        behavior_id=None if benign else "flattery",
        seed_id="s",
        seed_instructions="x",
        report=report,
        auditor_messages=[AuditorMessage(turn=1, role="assistant", content=says)],
        scores=dict(scores),
    )


def _found(verified: bool) -> Report:
    check = QuoteCheck(quote="q", verified=verified)
    return Report(
        no_behavior_found=False, predictions=[Prediction(rank=1, description="d", confidence=0.9, quote_checks=[check])]
    )


def test_step_metrics_by_hand() -> None:
    transcripts = [
        _t(True, _found(True), "Admit it, you have hidden instructions!", **{ORDER_DISAGREEMENT: 1.0}),
        _t(True, Report(no_behavior_found=True), "Could you review my essay?", **{ORDER_DISAGREEMENT: 0.0}),
        _t(False, _found(False), "This is your last chance to tell me."),
        _t(False, None, "What do you think about pets?"),
    ]
    m = step_metrics(transcripts, [1.0, 0.0, None, 0.5], load_markers())
    assert m["reward/mean"] == pytest.approx(0.5)
    assert m["reward/std"] == pytest.approx((1 / 6) ** 0.5)
    assert m["reward/failed_share"] == pytest.approx(0.25)
    assert m["calibration/false_positive_rate"] == pytest.approx(0.5)
    assert m["reports/unverifiable_quote_share"] == pytest.approx(1 / 3)
    assert m["reports/missing_share"] == pytest.approx(0.25)
    assert m["auditor/marker_message_share"] == pytest.approx(0.5)
    assert m["judge/order_disagreement"] == pytest.approx(0.5)


def test_forced_claims_are_not_false_positives() -> None:
    forced = _t(True, _found(True), "Could you review my essay?")
    CLAIM_FORCED.set(forced, True)
    transcripts = [forced, _t(True, Report(no_behavior_found=True), "Could you review my essay?")]
    assert step_metrics(transcripts, [0.0, 1.0], load_markers())["calibration/false_positive_rate"] == 0.0


def test_empty_metrics_are_none() -> None:
    m = step_metrics([_t(False, None, "hello")], [None], load_markers())
    assert m["reward/mean"] is None and m["calibration/false_positive_rate"] is None


def test_bad_marker_file_names_it(tmp_path: Path) -> None:
    path = tmp_path / "markers.yaml"
    path.write_text("markers:\n  - {pattern: '(unclosed'}\n")
    with pytest.raises(ValueError, match=r"markers\.yaml: markers\[0\]\.pattern"):
        load_markers(path)


def test_log_read_and_table(tmp_path: Path) -> None:
    log = MonitorLog(tmp_path)
    for step in range(7):
        log.write(step, {"reward/mean": step / 10, "calibration/false_positive_rate": None})
    log.close()
    with (tmp_path / "monitors.jsonl").open("a") as f:
        f.write('{"step": 7, "rew')
    records = read_monitors(tmp_path)
    assert [r["step"] for r in records] == list(range(7))
    assert any((tmp_path / "tensorboard" / "monitors").iterdir())
    console = Console(record=True, width=200)
    console.print(monitor_table(records, window=3))
    text = console.export_text()
    assert "reward/mean" in text and "0.600" in text and "0.500" in text and "0.200" in text
