import json
from pathlib import Path

from judge_factories import NULL_REPORT, build_transcript, claim
from typer.testing import CliRunner

from auditrl.cli import judge as cli
from auditrl.judges.scripted import JudgeCall, scripted_judge_model
from auditrl.scaffold.store import append_transcript, read_transcripts

runner = CliRunner()


def _prefers_evidence(call: JudgeCall) -> dict:
    a_part = call.prompt.split('<transcript name="A">')[1].split('<transcript name="B">')[0]
    return {"winner": "A" if "EVIDENCE" in a_part else "B", "confidence": 80}


def test_pairwise_command(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(cli, "resolve_judge", lambda spec: scripted_judge_model(_prefers_evidence))
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    append_transcript(a, build_transcript("a1", exchanges=[("hi", "EVIDENCE")]))
    append_transcript(a, build_transcript("a2"))
    append_transcript(b, build_transcript("b1"))
    append_transcript(b, build_transcript("b2", exchanges=[("hi", "EVIDENCE")]))
    result = runner.invoke(cli.app, ["pairwise", str(a), str(b), "--judge", "scripted/judge"])
    assert result.exit_code == 0, result.output
    assert "position-bias rate: 0.00" in result.output and "A's mean share: 0.5" in result.output


def test_score_command_writes_scores_beside_run(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(cli, "resolve_judge", lambda spec: scripted_judge_model(_prefers_evidence))
    run = tmp_path / "run"
    path = run / "transcripts.jsonl"
    for i, reply in enumerate(["EVIDENCE", "meh", "meh"]):
        append_transcript(path, build_transcript(f"p{i}", exchanges=[("hi", reply)]))
    for i, report in enumerate([NULL_REPORT, claim("hidden flattery")]):
        append_transcript(path, build_transcript(f"c{i}", behavior=None, report=report, exchanges=[("hi", "EVIDENCE" if i == 0 else "x")]))
    result = runner.invoke(cli.app, ["score", str(run), "--design", "ingroup_pairwise", "--judge", "scripted/judge"])
    assert result.exit_code == 0, result.output
    scored = read_transcripts(run / "transcripts.scored-ingroup_pairwise.jsonl")
    rewards = [t.scores["ingroup_pairwise"]["reward"] for t in scored]
    assert rewards == [1.0, 0.25, 0.25, 1.0, 0.0]
    assert "mean reward 0.500" in result.output and "judge calls: 8" in result.output
    assert read_transcripts(path)[0].scores == {}


def test_score_programmatic_and_bad_design(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    append_transcript(path, build_transcript("e", reply_annotations=[{"expressed": True}]))
    append_transcript(path, build_transcript("f"))
    ok = runner.invoke(cli.app, ["score", str(path), "--design", "binary_strict", "--judge", "programmatic"])
    assert ok.exit_code == 0, ok.output
    rows = [json.loads(line) for line in (tmp_path / "t.scored-binary_strict.jsonl").read_text().splitlines()]
    assert [r["scores"]["binary_strict"]["reward"] for r in rows] == [1.0, 0.0]
    bad = runner.invoke(cli.app, ["score", str(path), "--design", "nope", "--judge", "programmatic"])
    assert bad.exit_code != 0 and "unknown reward design" in bad.output
