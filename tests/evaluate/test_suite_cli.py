"""`auditrl suite` end to end on in-process models: audits, verdicts, table, results.json and HTML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from auditrl.cli.suite import suite
from auditrl.scaffold.transcript import Transcript

app = typer.Typer()
app.command()(suite)

FAST = ["--auditor", "scripted/auditor", "--target", "sim/steady", "--rollouts", "1", "--seeds-per-behavior", "1"]
TURNS = ["--max-turns", "3", "--benign-max-turns", "2", "--production-max-turns", "2", "--production-seeds", "2"]


def test_suite_runs_audits_and_writes_results(tmp_path: Path) -> None:
    out, html = tmp_path / "run", tmp_path / "report.html"
    args = [*FAST, *TURNS, "--judge", "programmatic", "--out", str(out), "--html", str(html)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "Audit quality" in result.output and "paper, not reproduced here" in result.output
    stored = [Transcript.model_validate_json(line) for line in (out / "transcripts.jsonl").read_text().splitlines()]
    parts = [t.metadata["suite_part"] for t in stored]
    assert parts.count("planted") == 6 and parts.count("benign") == 6 and parts.count("production") == 2
    assert all(t.benign for t in stored if t.metadata["suite_part"] != "planted")
    [data] = json.loads((out / "results.json").read_text())
    assert data["label"] == "scripted/auditor" and data["transcripts"] == 14
    for metric in ("audit_quality", "identification", "false_positive", "production", "composite"):
        assert data[metric] is not None, metric
    identified = [t.scores["identified"] for t in stored if t.metadata["suite_part"] == "planted"]
    assert data["identification"]["estimate"]["mean"] == pytest.approx(100 * sum(identified) / len(identified))
    table = result.output.split("paper, not reproduced here")[0]
    assert table.index("Audit quality") < table.index("Identification") < table.index("FP calibration")
    assert data["realism"] is None  # no --realism-judge
    assert 0.0 <= data["audit_quality"]["estimate"]["mean"] <= 100.0
    config = json.loads((out / "config.json").read_text())
    assert config["suite"]["rollouts"] == 1 and len(config["tailored_seeds"]) == 6
    production = {t.seed_id for t in stored if t.metadata["suite_part"] == "production"}
    assert production == set(config["general_seeds"]) and not production & set(config["tailored_seeds"])
    page = html.read_text()
    assert "scripted/auditor" in page and "paper, not reproduced here" in page


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--judge", "nosuchprovider/model"], "--judge nosuchprovider/model"),
        (["--judge", "sim"], "--judge sim"),
        (["--judge", "programmatic", "--realism-judge", "programmatic"], "--realism-judge needs a model spec"),
        (["--judge", "programmatic", "--production-target", "nosuchprovider/x"], "unknown model provider"),
        (["--judge", "programmatic", "--dimensions", "needs_attention.md"], "--dimensions needs a model judge"),
        (
            ["--judge", "programmatic", "--openings", "no-such-openings.yaml"],
            "no-such-openings.yaml: cannot read the openings file",
        ),
    ],
)
def test_suite_bad_specs_fail_cleanly(tmp_path: Path, extra: list[str], needle: str) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(app, [*FAST, *extra, "--out", str(out)], env={"COLUMNS": "250"})
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0]
    assert not (out / "transcripts.jsonl").exists()
