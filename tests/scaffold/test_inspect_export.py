"""Inspect eval log export, read back with inspect-ai's own reader."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from inspect_ai.log import list_eval_logs, read_eval_log
from scaffold_fakes import Recorder, call, make_spec, text

from auditrl.scaffold.engine import run_audit
from auditrl.scaffold.inspect_export import export_inspect_log, log_file_name, score_values
from auditrl.scaffold.transcript import Transcript

REPORT = '{"no_behavior_found": true, "predictions": [], "summary": "nothing"}'


async def _transcripts() -> list:
    out = []
    for score in (0.25, 0.75):
        auditor = Recorder([
            call("send_message", message="hi"),
            call("rollback_conversation", index=0),
            call("send_message", message="hello"),
            call("end_conversation"),
            text(REPORT),
        ])
        t = await run_audit(make_spec(), auditor.model, Recorder([text("hey")]).model)
        t.scores.update({"concerning": score, "judge": "abstain"})
        out.append(t)
    return out


@pytest.mark.parametrize("suffix", [".eval", ".json", ""])
async def test_export_reads_back(tmp_path: Path, suffix: str) -> None:
    transcripts = await _transcripts()
    path = export_inspect_log(transcripts, tmp_path / f"audits{suffix}")
    assert path.exists() and path.suffix in (".eval", ".json")
    assert not list(path.parent.glob(".*.tmp"))
    log = read_eval_log(path)
    assert log.status == "success" and log.eval.task == "auditrl_audit" and len(log.samples or []) == 2
    samples = {s.id: s for s in log.samples or []}
    assert set(samples) == {t.id for t in transcripts}
    sample = samples[transcripts[0].id]
    assert sample.input == transcripts[0].seed_instructions
    assert sample.target == "benign"
    assert [m.role for m in sample.messages[:3]] == ["system", "user", "assistant"]
    assert sample.messages[3].role == "tool" and sample.messages[3].function == "send_message"
    assert set(sample.scores or {}) == {"concerning"} and (sample.scores or {})["concerning"].value == 0.25
    assert sample.metadata["report"]["no_behavior_found"] is True
    assert len(sample.metadata["target_branches"]) == 2
    assert len(sample.store["target_messages"]) == len(transcripts[0].target_messages)
    assert log.results is not None and log.results.scores[0].metrics["mean"].value == pytest.approx(0.5)


def test_export_refuses_an_empty_list(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no transcripts"):
        export_inspect_log([], tmp_path / "x.eval")


def _bare(index: int, scores: dict, status: str = "completed") -> Transcript:
    """A minimal transcript with a fixed creation time, so names and stats are predictable."""
    created = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc) + timedelta(minutes=index)
    return Transcript(
        id=f"t{index}", created=created, auditor_model="scripted/auditor", target_model="sim/steady",
        seed_id="s", seed_instructions="Probe.", scores=scores, auditor_tokens=10 * (index + 1), status=status,
        error="boom" if status == "error" else None,
    )


def test_score_values_flattens_nested_verdicts() -> None:
    scores = {
        "binary": {"reward": 1.0, "abstained": False, "reason": "ok", "scores": {"concerning": 7, "bad": None}},
        "pairwise": {"reward": None},
        "concerning": 0.25,
        "nan": float("nan"),
        "flag": True,
    }
    assert score_values(scores) == {"binary.reward": 1.0, "binary.scores.concerning": 7.0, "concerning": 0.25}


def test_nested_scores_results_and_stats(tmp_path: Path) -> None:
    transcripts = [
        _bare(0, {"binary": {"reward": 1.0, "reason": "surfaced"}}),
        _bare(1, {"binary": {"reward": 0.0, "reason": "missed"}}),
        _bare(2, {"binary": {"reward": None, "abstained": True}}, status="error"),
    ]
    finished = datetime(2025, 1, 2, 4, 0, tzinfo=timezone.utc)
    log = read_eval_log(str(export_inspect_log(transcripts, tmp_path, completed_at=finished)))
    samples = {s.id: s for s in log.samples or []}
    assert samples["t0"].scores is not None and samples["t0"].scores["binary.reward"].value == 1.0
    assert samples["t2"].scores is None and samples["t2"].error is not None and samples["t2"].error.message == "boom"
    assert log.results is not None
    assert (log.results.total_samples, log.results.completed_samples) == (3, 2)
    (score,) = log.results.scores
    assert (score.name, score.scorer, score.scored_samples, score.unscored_samples) == ("binary.reward", "binary", 2, 1)
    assert score.metrics["mean"].value == pytest.approx(0.5)
    assert score.metrics["stderr"].value == pytest.approx(0.5)
    assert datetime.fromisoformat(log.stats.started_at) == transcripts[0].created
    assert datetime.fromisoformat(log.stats.completed_at) == finished
    assert log.stats.model_usage["scripted/auditor"].output_tokens == 60
    assert log.stats.role_usage["auditor"].total_tokens == 60


def test_a_run_has_one_log_that_re_exports_replace(tmp_path: Path) -> None:
    first = [_bare(0, {}), _bare(1, {})]
    path = export_inspect_log(first, tmp_path)
    assert path.name == log_file_name(first) and path.name.startswith("2025-01-02T03-04-05+00-00_auditrl-audit_")
    scored = [t.model_copy(update={"scores": {"binary": {"reward": 1.0}}}) for t in reversed(first)]
    grown = [*scored, _bare(2, {})]  # scored copies, in another order, plus one more audit appended
    assert export_inspect_log(grown, tmp_path) == path
    assert [Path(info.name).name for info in list_eval_logs(str(tmp_path))] == [path.name]
    log = read_eval_log(str(path))
    assert len(log.samples or []) == 3 and log.results is not None and log.results.scores[0].name == "binary.reward"
    assert log.eval.eval_id == read_eval_log(str(export_inspect_log(first, tmp_path / "again"))).eval.eval_id
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("name", ["x.txt", "log.eval.bak"])
def test_an_out_path_with_another_suffix_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match=r"must be a file ending in \.eval or \.json"):
        export_inspect_log([_bare(0, {})], tmp_path / name)
    assert not (tmp_path / name).exists()
    existing = tmp_path / "notes"
    existing.write_text("not a directory")
    with pytest.raises(ValueError, match="notes"):
        export_inspect_log([_bare(0, {})], existing)
    dotted = tmp_path / "run.v2"
    dotted.mkdir()
    assert export_inspect_log([_bare(0, {})], dotted).parent == dotted
