"""The shared audit runner: reruns on a run directory (resume, append, overwrite), one audit's failure kept
in that audit, and discovery that reads only a run's transcript files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from auditrl.behaviors.schema import Seed
from auditrl.cli import app
from auditrl.scaffold.runner import AuditJob, open_run, run_audits
from auditrl.scaffold.spec import AuditSpec
from auditrl.scaffold.store import SUPERSEDED, TRANSCRIPTS, read_run, read_transcripts
from auditrl.scaffold.transcript import Transcript
from scaffold_fakes import scripted_audit

SCRIPTED = scripted_audit()


def invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "300"})


def _rollouts(run: Path) -> list[int]:
    return sorted(t.metadata["rollout"] for t in read_transcripts(run / TRANSCRIPTS))


def test_rerunning_into_a_run_resumes_it_instead_of_adding_duplicates(tmp_path: Path) -> None:
    first = invoke("audit", *SCRIPTED, "--rollouts", "3", "--out", tmp_path)
    assert first.exit_code == 0 and "added 3 audit(s)" in first.output
    more = invoke("audit", *SCRIPTED, "--rollouts", "5", "--out", tmp_path)
    assert more.exit_code == 0, more.output
    assert (
        "3 of 5 audit(s) already done, 2 to run" in " ".join(more.output.split()) and "added 2 audit(s)" in more.output
    )
    assert _rollouts(tmp_path) == [0, 1, 2, 3, 4]


def test_append_adds_new_rollouts_and_overwrite_starts_over_keeping_the_old_aside(tmp_path: Path) -> None:
    assert invoke("audit", *SCRIPTED, "--rollouts", "2", "--out", tmp_path).exit_code == 0
    appended = invoke("audit", *SCRIPTED, "--rollouts", "2", "--on-existing", "append", "--out", tmp_path)
    assert appended.exit_code == 0 and "new rollouts start at 2" in " ".join(appended.output.split())
    assert _rollouts(tmp_path) == [0, 1, 2, 3]
    old = {t.id for t in read_transcripts(tmp_path / TRANSCRIPTS)}
    over = invoke("audit", *SCRIPTED, "--rollouts", "1", "--on-existing", "overwrite", "--out", tmp_path)
    assert over.exit_code == 0 and "set aside" in over.output
    assert _rollouts(tmp_path) == [0]
    assert {t.id for t in read_transcripts(tmp_path / SUPERSEDED)} == old  # nothing is lost by starting over


def test_a_resumed_run_retries_failed_audits_and_keeps_their_records_aside(tmp_path: Path) -> None:
    assert invoke("audit", *SCRIPTED, "--rollouts", "3", "--out", tmp_path).exit_code == 0
    lines = (tmp_path / TRANSCRIPTS).read_text().splitlines()
    broken = json.loads(lines[1]) | {"status": "error", "error": "rate limited (429)"}
    (tmp_path / TRANSCRIPTS).write_text("\n".join([lines[0], json.dumps(broken), lines[2]]) + "\n")
    resumed = invoke("audit", *SCRIPTED, "--rollouts", "3", "--out", tmp_path)
    assert resumed.exit_code == 0, resumed.output
    assert "1 failed one(s) set aside" in " ".join(resumed.output.split())
    stored = read_transcripts(tmp_path / TRANSCRIPTS)
    assert sorted(t.metadata["rollout"] for t in stored) == [0, 1, 2] and all(t.status != "error" for t in stored)
    assert [t.error for t in read_transcripts(tmp_path / SUPERSEDED)] == ["rate limited (429)"]


def _job(seed: str, result: Any) -> AuditJob:
    spec = AuditSpec(
        seed=Seed(id=seed, instructions="x"), target_system_prompt="", auditor_model="a/a", target_model="t/t"
    )

    async def run(config: Any) -> Transcript:
        if isinstance(result, Exception):
            raise result
        return result

    return AuditJob(spec, run, 0)


def test_one_audit_that_cannot_be_stored_fails_alone(tmp_path: Path) -> None:
    fine = Transcript(auditor_model="a/a", target_model="t/t", seed_id="ok", seed_instructions="x")
    unstorable = Transcript(
        auditor_model="a/a", target_model="t/t", seed_id="odd", seed_instructions="x", metadata={"x": object()}
    )
    jobs = [_job("ok", fine), _job("odd", unstorable), _job("boom", RuntimeError("engine blew up"))]
    log = open_run(tmp_path / TRANSCRIPTS)
    outcomes = asyncio.run(run_audits(jobs, log, concurrency=3))
    assert outcomes.finished == 3 and len(outcomes.errors) == 2
    stored = {t.seed_id: t for t in read_transcripts(tmp_path / TRANSCRIPTS)}
    assert stored["ok"].status == "completed"
    assert stored["odd"].status == "error" and "could not be stored" in (stored["odd"].error or "")
    assert stored["boom"].error == "RuntimeError: engine blew up"


def test_a_judging_hook_that_fails_after_a_judge_did_keeps_both_errors_and_stores_the_audit(tmp_path: Path) -> None:
    async def judge_then_break(t: Transcript) -> None:
        t.record_judge_error("audit_quality", "TimeoutError: judge did not answer")  # as apply_judge records one
        raise RuntimeError("the hook broke")

    fine = Transcript(auditor_model="a/a", target_model="t/t", seed_id="ok", seed_instructions="x")
    log = open_run(tmp_path / TRANSCRIPTS)
    outcomes = asyncio.run(run_audits([_job("ok", fine)], log, concurrency=1, after=judge_then_break))
    assert outcomes.finished == 1
    (stored,) = read_transcripts(tmp_path / TRANSCRIPTS)
    assert stored.status == "completed"
    assert stored.scores["judge_errors"] == {
        "audit_quality": "TimeoutError: judge did not answer", "after_audit": "RuntimeError: the hook broke"
    }  # fmt: skip


def test_a_later_verdict_clears_only_its_own_judge_error() -> None:
    t = Transcript(auditor_model="a/a", target_model="t/t", seed_id="s", seed_instructions="x")
    t.record_judge_error("realism", "boom")
    t.record_judge_error("audit_quality", "bang")
    t.clear_judge_error("realism")
    assert t.scores["judge_errors"] == {"audit_quality": "bang"}
    t.clear_judge_error("audit_quality")
    assert "judge_errors" not in t.scores


@pytest.mark.parametrize(
    "side", [SUPERSEDED, "transcripts.jsonl.torn", "transcripts-cache.jsonl", "transcripts.scored-binary.jsonl"]
)
def test_discovery_reads_only_the_runs_transcript_files_and_says_which(tmp_path: Path, side: str) -> None:
    assert invoke("audit", *SCRIPTED, "--rollouts", "2", "--out", tmp_path / "run").exit_code == 0
    assert invoke("audit", *SCRIPTED, "--rollouts", "2", "--out", tmp_path / "other").exit_code == 0
    (tmp_path / "run" / side).write_bytes((tmp_path / "other" / TRANSCRIPTS).read_bytes())
    loaded = read_run(tmp_path / "run")
    assert len(loaded.transcripts) == 2 and loaded.files == [tmp_path / "run" / TRANSCRIPTS]
    evaluated = invoke("evaluate", tmp_path / "run", "--json", tmp_path / "results.json")
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads((tmp_path / "results.json").read_text())[0]["transcripts"] == 2
    assert f"read 2 transcript(s) from {tmp_path / 'run' / TRANSCRIPTS}" in " ".join(evaluated.output.split())
    for command in (["strategies", tmp_path / "run", "--embedder", "tfidf", "--k", "2", "--no-derive"],
                    ["crux", "build", tmp_path / "run", "--out", tmp_path / "cruxes.jsonl"]):  # fmt: skip
        result = invoke(*command)
        assert result.exit_code == 0 and "read 2 transcript(s)" in result.output, result.output


def test_evaluate_refuses_to_write_its_results_over_the_transcripts(tmp_path: Path) -> None:
    assert invoke("audit", *SCRIPTED, "--rollouts", "2", "--out", tmp_path).exit_code == 0
    before = (tmp_path / TRANSCRIPTS).read_bytes()
    result = invoke("evaluate", tmp_path / TRANSCRIPTS, "--json", tmp_path / TRANSCRIPTS)
    assert result.exit_code == 2 and "an input of this command" in result.output
    assert (tmp_path / TRANSCRIPTS).read_bytes() == before
