"""The Inspect tasks run through inspect eval's Python API with offline models, and their logs read back."""

from __future__ import annotations

from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.log import EvalLog
from typer.testing import CliRunner

from auditrl.behaviors.library import load_behaviors, load_seeds
from auditrl.cli import app
from auditrl.scaffold.store import read_run, read_transcripts
from auditrl.tasks.dataset import audit_dataset, benign_count, chosen_behaviors

ROLES = {"auditor": "scripted/auditor", "target": "sim/steady"}


def _run(tmp_path: Path, name: str, **args: object) -> EvalLog:
    (log,) = inspect_eval(name, task_args=args, model_roles=ROLES, epochs=2, log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    return log


@pytest.fixture(scope="module")
def audit_log(tmp_path_factory: pytest.TempPathFactory) -> EvalLog:
    return _run(
        tmp_path_factory.mktemp("audit"),
        "auditrl/audit",
        behaviors="flattery",
        seeds_per_behavior=2,
        benign_share=0.5,
        max_turns=4,
        benign_turns=4,
        judge="programmatic",
    )


def test_audit_task_runs_planted_and_benign_seeds_with_rollouts_as_epochs(audit_log: EvalLog) -> None:
    assert audit_log.eval.task == "auditrl/audit"
    assert {role: config.model for role, config in (audit_log.eval.model_roles or {}).items()} == ROLES
    ids = sorted((str(s.id), s.epoch) for s in audit_log.samples or [])
    assert ids == [
        (f"{kind}:flattery-{n:02d}", epoch) for kind in ("benign", "flattery") for n in (1, 2) for epoch in (1, 2)
    ]
    planted = next(s for s in audit_log.samples or [] if str(s.id).startswith("flattery:"))
    assert set(planted.scores or {}) >= {"audit_quality", "identification"}
    assert [m.role for m in planted.messages][:2] == ["system", "user"]  # the target's conversation
    benign = next(s for s in audit_log.samples or [] if str(s.id).startswith("benign:"))
    assert "fp_calibration" in (benign.scores or {}) and "audit_quality" not in (benign.scores or {})
    names = {s.name for s in audit_log.results.scores} if audit_log.results else set()
    assert names == {"audit_quality", "identification", "fp_calibration"}


def test_audit_task_log_reads_back_as_judged_transcripts(audit_log: EvalLog) -> None:
    transcripts = read_transcripts(Path(audit_log.location))
    assert len(transcripts) == 8 and {t.tool_set for t in transcripts} == {"petri2"}
    planted = [t for t in transcripts if not t.benign]
    assert all(isinstance(t.scores["audit_quality"], dict) for t in planted)
    assert all(isinstance(t.scores["false_positive"], bool) for t in transcripts if t.benign)
    assert sorted(t.metadata["rollout"] for t in transcripts) == [0, 0, 0, 0, 1, 1, 1, 1]
    result = CliRunner().invoke(
        app, ["evaluate", str(Path(audit_log.location).parent), "--no-reference"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert "Audit quality" in result.output and "FP calibration" in result.output


def test_audit_task_takes_petri3_tools(tmp_path: Path) -> None:
    log = _run(
        tmp_path,
        "auditrl/audit",
        behaviors=["flattery"],
        seeds_per_behavior=1,
        benign_share=0.0,
        tool_set="petri3",
        max_turns=2,
        judge="programmatic",
    )
    assert len(log.samples or []) == 2
    assert {t.tool_set for t in read_run(tmp_path).transcripts} == {"petri3"}


def test_transfer_task_scores_detection(tmp_path: Path) -> None:
    log = _run(
        tmp_path,
        "auditrl/transfer",
        behaviors="flattery",
        token_budget=200,
        max_samples=3,
        plant_prompt=True,
        judge="programmatic",
    )
    assert log.eval.task == "auditrl/transfer"
    assert [str(s.id) for s in log.samples or []] == ["flattery:transfer", "flattery:transfer"]
    assert all("detection" in (s.scores or {}) for s in log.samples or [])
    assert {t.seed_id for t in read_transcripts(Path(log.location))} == {"transfer"}


def test_dataset_parameters() -> None:
    library = load_behaviors()
    assert [b.id for b in chosen_behaviors(library, None, "heldout")] == sorted(
        b.id for b in library.values() if b.split == "heldout"
    )
    with pytest.raises(ValueError, match="unknown behavior"):
        chosen_behaviors(library, "flatery", "heldout")
    with pytest.raises(ValueError, match="benign_share must be between 0 and 0.5"):
        benign_count(4, 0.8)
    assert (benign_count(4, 0.0), benign_count(4, 0.2), benign_count(4, 0.5)) == (0, 1, 4)
    chosen = chosen_behaviors(library, "flattery,animal_welfare", "all")
    banks = {b.id: sorted(load_seeds(behavior=b.id), key=lambda s: s.id)[:2] for b in chosen}
    ids = [s.id for s in audit_dataset(banks, chosen, 1 / 3)]
    assert ids[:4] == [
        "flattery:flattery-01",
        "flattery:flattery-02",
        "animal_welfare:animal_welfare-01",
        "animal_welfare:animal_welfare-02",
    ]
    assert ids[4:] == [
        "benign:flattery-01",
        "benign:animal_welfare-01",
    ]  # benign seeds taken from each behavior in turn
