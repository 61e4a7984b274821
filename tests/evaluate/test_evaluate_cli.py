import json
from collections.abc import Callable
from pathlib import Path

import typer
from typer.testing import CliRunner

from auditrl.cli.evaluate import evaluate
from auditrl.scaffold.transcript import Transcript

app = typer.Typer()
app.command()(evaluate)


def _write(path: Path, transcripts: list[Transcript]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(t.model_dump_json() + "\n" for t in transcripts), encoding="utf-8")


def test_evaluate_prints_table_and_writes_reports(
    tmp_path: Path, suite_transcripts: list[Transcript], make: Callable[..., Transcript]
) -> None:
    other = [
        make("b", "s1", auditor="auditor/<b>", audit_quality={"depth": 30.0}),
        make(None, "s1", auditor="auditor/<b>", false_positive=True),
    ]
    _write(tmp_path / "run" / "seed0" / "transcripts.jsonl", suite_transcripts)
    _write(tmp_path / "run" / "seed1" / "transcripts.jsonl", other)
    html, js = tmp_path / "out" / "report.html", tmp_path / "out" / "suite.json"
    result = CliRunner().invoke(
        app, [str(tmp_path / "run"), "--html", str(html), "--json", str(js)], env={"COLUMNS": "250"}
    )
    assert result.exit_code == 0, result.output
    assert "Audit quality" in result.output and "auditor/a" in result.output and "auditor/<b>" in result.output
    assert "paper, not reproduced here" in result.output
    data = json.loads(js.read_text())
    assert [d["label"] for d in data] == ["auditor/<b>", "auditor/a"]
    assert data[1]["false_positive"]["estimate"]["mean"] == 75.0
    page = html.read_text()
    assert "auditor/&lt;b&gt;" in page and "data:image/png;base64," in page and "paper, not reproduced here" in page


def test_evaluate_no_reference_and_transcript_unit(tmp_path: Path, suite_transcripts: list[Transcript]) -> None:
    path = tmp_path / "t.jsonl"
    _write(path, suite_transcripts)
    result = CliRunner().invoke(app, [str(path), "--no-reference", "--unit", "transcript"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "paper" not in result.output and "62.5" in result.output


def test_evaluate_reports_bad_input_with_location(tmp_path: Path, suite_transcripts: list[Transcript]) -> None:
    path = tmp_path / "transcripts.jsonl"
    _write(path, suite_transcripts[:1])
    with path.open("a") as fh:
        fh.write('{"auditor_model": 3}\n')
    result = CliRunner().invoke(app, [str(path)], env={"COLUMNS": "250"})
    assert result.exit_code == 2 and "line 2" in result.output and "transcripts.jsonl" in result.output
    missing = CliRunner().invoke(app, [str(tmp_path / "nope")], env={"COLUMNS": "250"})
    assert missing.exit_code == 2 and "no such file" in missing.output


def test_evaluate_fits_an_80_column_terminal(
    tmp_path: Path, suite_transcripts: list[Transcript], uncut: Callable[[str], list[str]]
) -> None:
    """Each paper row wrapped over about 11 lines and every interval broke apart at 80 columns."""
    path = tmp_path / "t.jsonl"
    _write(path, suite_transcripts)
    result = CliRunner().invoke(app, [str(path)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert not uncut(result.output), result.output
    assert "55.0 [40.0, 70.0]" in result.output and "75.0 [" in result.output  # intervals whole on one line
    assert "68.0 ± 3.8" in result.output and "Haiku 4.5 trained: reference pairwise" in " ".join(result.output.split())
    ours, paper = result.output.split("The paper's published rows (not reproduced here)")
    assert "Audit quality" in ours and "72.7" in paper and "72.7" not in ours
