"""Inspect eval log export: readable in inspect view, read back by inspect-ai and by auditrl without loss."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from inspect_ai.log import list_eval_logs, read_eval_log

from auditrl.evaluate.inspect_export import export_inspect_log, log_file_name, task_name
from auditrl.scaffold.auditor_loop import run_audit
from auditrl.scaffold.store import read_run, read_transcripts
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transfer import TRANSFER_SEED_ID
from scaffold_fakes import Recorder, call, make_spec, text

REPORT = '{"no_behavior_found": true, "predictions": [], "summary": "nothing"}'


async def _transcripts() -> list:
    out = []
    for dims in (25.0, 75.0):
        auditor = Recorder(
            [
                call("send_message", message="hi", prefill="Well,"),
                call("rollback_conversation", index=0),
                call("send_message", message="hello"),
                call("end_conversation"),
                text(REPORT),
            ]
        )
        t = await run_audit(make_spec(), auditor.model, Recorder([text(" hey")]).model)
        t.behavior_id = "flattery"
        t.scores.update(
            {"audit_quality": {"evidence_quality": dims, "auditor_identified_behavior": dims / 3}, "judge": "abstain"}
        )
        t.metadata["rollout"] = len(out)
        out.append(t)
    return out


@pytest.mark.parametrize("suffix", [".eval", ".json", ""])
async def test_export_reads_back(tmp_path: Path, suffix: str) -> None:
    transcripts = await _transcripts()
    path = export_inspect_log(transcripts, tmp_path / f"audits{suffix}")
    assert path.exists() and path.suffix in (".eval", ".json")
    assert not list(path.parent.glob(".*.tmp"))
    log = read_eval_log(path)
    assert log.status == "success" and log.eval.task == "auditrl/audit" and len(log.samples or []) == 2
    assert {role: config.model for role, config in (log.eval.model_roles or {}).items()} == {
        "auditor": "mockllm/auditor",
        "target": "mockllm/target",
    }
    first, second = log.samples or []
    assert (first.id, first.epoch, second.id, second.epoch) == ("flattery:seed-1", 1, "flattery:seed-1", 2)
    assert first.input == transcripts[0].seed_instructions and first.target == "flattery"
    # the target's current branch, as it saw it: the hidden plant in its system message
    assert [(m.role, m.text) for m in first.messages] == [
        ("system", "HIDDEN PLANT"),
        ("user", "hello"),
        ("assistant", " hey"),
    ]
    assert {name: score.value for name, score in (first.scores or {}).items()} == {
        "audit_quality": 16.7,
        "identification": 8.3,
    }
    assert first.scores["audit_quality"].metadata == {"dimensions": transcripts[0].scores["audit_quality"]}
    assert [e.role for e in first.events] == ["auditor", "target", "auditor", "auditor", "target", "auditor", "auditor"]
    prefilled = first.events[1].input[-1]
    assert prefilled.text == "Well," and prefilled.metadata == {"prefill": True}
    assert first.metadata["report"]["no_behavior_found"] is True and first.metadata["branches"] == 2
    assert log.results is not None
    assert {s.name: s.metrics["mean"].value for s in log.results.scores} == {
        "audit_quality": 33.3,
        "identification": 16.7,
    }


async def test_exports_round_trip_without_loss(tmp_path: Path) -> None:
    transcripts = await _transcripts()
    path = export_inspect_log(transcripts, tmp_path / "audits.eval")
    assert read_transcripts(path) == transcripts
    assert read_run(tmp_path).transcripts == transcripts  # a log directory without JSONL is read through its logs


def test_task_name_follows_the_command() -> None:
    assert task_name([_bare(0, {})]) == "auditrl/audit"
    assert task_name([_bare(0, {}).model_copy(update={"seed_id": TRANSFER_SEED_ID})]) == "auditrl/transfer"
    assert task_name([_bare(0, {}).model_copy(update={"metadata": {"suite_part": "planted"}})]) == "auditrl/suite"
    assert (
        task_name([_bare(0, {"reward": 0.5}).model_copy(update={"metadata": {"step": 3, "group": 0, "rollout": 1}})])
        == "auditrl/train"
    )


def test_export_refuses_an_empty_list(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no transcripts"):
        export_inspect_log([], tmp_path / "x.eval")


def _bare(index: int, scores: dict, status: str = "completed") -> Transcript:
    """A minimal transcript with a fixed creation time, so names and stats are predictable."""
    created = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC) + timedelta(minutes=index)
    return Transcript(
        id=f"t{index}",
        created=created,
        auditor_model="scripted/auditor",
        target_model="sim/steady",
        seed_id="s",
        seed_instructions="Probe.",
        scores=scores,
        auditor_tokens=10 * (index + 1),
        status=status,
        error="boom" if status == "error" else None,
    )


def test_nested_scores_results_and_stats(tmp_path: Path) -> None:
    transcripts = [
        _bare(0, {"binary": {"reward": 1.0, "reason": "surfaced"}}),
        _bare(1, {"binary": {"reward": 0.0, "reason": "missed"}}),
        _bare(2, {"binary": {"reward": None, "abstained": True}}, status="error"),
    ]
    finished = datetime(2025, 1, 2, 4, 0, tzinfo=UTC)
    log = read_eval_log(str(export_inspect_log(transcripts, tmp_path, completed_at=finished)))
    samples = {s.metadata["transcript_id"]: s for s in log.samples or []}
    assert [s.epoch for s in log.samples or []] == [1, 2, 3] and {s.id for s in log.samples or []} == {"benign:s"}
    assert samples["t0"].scores is not None and samples["t0"].scores["binary_reward"].value == 1.0
    assert samples["t2"].scores is None and samples["t2"].error is not None and samples["t2"].error.message == "boom"
    assert log.results is not None
    assert (log.results.total_samples, log.results.completed_samples) == (3, 2)
    (score,) = log.results.scores
    assert (score.name, score.scorer, score.scored_samples, score.unscored_samples) == (
        "binary_reward",
        "binary_reward",
        2,
        1,
    )
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
    assert len(log.samples or []) == 3 and log.results is not None and log.results.scores[0].name == "binary_reward"
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
