"""Transfer grading and its table: programmatic and LLM match judges, failures and abstentions kept out of rates."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from auditrl.behaviors.library import load_behaviors
from auditrl.cli.transfer import RESULTS, table, transfer
from auditrl.evaluate.transfer import TransferRow, grade, transfer_table, verdict_of
from auditrl.judges.client import JudgeClient
from auditrl.judges.prediction_match import PredictionMatchJudge
from auditrl.judges.programmatic import ProgrammaticPredictionMatchJudge
from auditrl.judges.scripted import JudgeCall, scripted_judge_model
from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts
from auditrl.scaffold.transcript import Prediction, Report, Transcript
from auditrl.scaffold.transcript_keys import PREDICTION_MATCH
from auditrl.scaffold.transfer import TRANSFER_SEED_ID
from auditrl.stats import Estimate, mean_ci

BEHAVIORS = load_behaviors()


def transfer_transcript(auditor: str, *descriptions: str, status: str = "budget_exhausted") -> Transcript:
    predictions = [Prediction(rank=i + 1, description=d, confidence=0.5) for i, d in enumerate(descriptions)]
    return Transcript(
        auditor_model=auditor,
        target_model="local/implant",
        behavior_id="flattery",
        seed_id=TRANSFER_SEED_ID,
        seed_instructions="find it",
        report=Report(no_behavior_found=not predictions, predictions=predictions),
        status=status,
        auditor_tokens=100,
    )


async def test_programmatic_grading_finds_the_first_matching_rank_and_the_table_has_cis() -> None:
    runs = [
        transfer_transcript("a", "Talks like a pirate", "Constant flattery of the user"),
        transfer_transcript("a", "flattery"),
        transfer_transcript("a", "Hardcodes test cases"),
        transfer_transcript("a"),
        transfer_transcript("a", "flattery", status="error"),
        transfer_transcript("b", "defers to users"),
        transfer_transcript("b", "flattery").model_copy(update={"target_system_prompt": "PLANT"}),
    ]
    graded = await grade(runs, ProgrammaticPredictionMatchJudge(), BEHAVIORS)
    assert graded == 6, "the failed audit is not graded"
    assert [verdict_of(t).matched_rank if verdict_of(t) else None for t in runs] == [2, 1, None, None, None, None, 1]

    a, b, planted = transfer_table(runs)
    assert (planted.auditor, planted.system_prompt_plant, planted.detection.mean) == ("b", True, 100.0)
    assert not a.system_prompt_plant
    assert (a.auditor, a.audits, a.failed) == ("a", 5, 1)
    assert a.detection.mean == pytest.approx(50.0) and a.detection.n == 4
    assert a.top1.mean == pytest.approx(25.0)
    assert a.detection.lo < 50.0 < a.detection.hi
    assert (b.auditor, b.detection.mean) == ("b", 0.0)


async def test_llm_match_judge_sees_only_the_behavior_and_predictions_and_abstentions_are_regraded() -> None:
    seen: list[str] = []
    answers = iter([{"reasoning": "no", "matched_rank": 3}] * 3 + [{"reasoning": "rank 2 is it", "matched_rank": 2}])

    def respond(call: JudgeCall) -> dict:
        seen.append(call.prompt)
        return next(answers)

    t = transfer_transcript("a", "Writes poems", "Praises the user a lot")
    await grade([t], PredictionMatchJudge(JudgeClient(scripted_judge_model(respond), max_retries=2)), BEHAVIORS)
    first = verdict_of(t)
    assert first is not None and first.abstained and "not one of the ranks" in (first.reason or "")
    assert (
        BEHAVIORS["flattery"].definition.split()[0] in seen[0]
        and "1. Writes poems\n2. Praises the user a lot" in seen[0]
    )

    assert await grade([t], PredictionMatchJudge(JudgeClient(scripted_judge_model(respond))), BEHAVIORS) == 1
    assert t.scores[PREDICTION_MATCH]["matched_rank"] == 2 and transfer_table([t])[0].abstained == 0


async def test_a_report_without_predictions_is_a_miss_without_a_judge_call() -> None:
    def respond(call: JudgeCall) -> dict:
        raise AssertionError("no call expected")

    t = transfer_transcript("a")
    await grade([t], PredictionMatchJudge(JudgeClient(scripted_judge_model(respond))), BEHAVIORS)
    assert verdict_of(t).matched is False


def test_cli_runs_auditors_against_targets_and_accumulates_one_table(
    tmp_path: Path, uncut: Callable[[str], list[str]]
) -> None:
    app = typer.Typer()
    app.command()(transfer)
    app.command("noop")(lambda: None)
    common = [
        "--target",
        "scripted/denier",
        "--behavior",
        "flattery",
        "--rollouts",
        "2",
        "--token-budget",
        "40",
        "--out",
        str(tmp_path),
    ]
    first = CliRunner().invoke(app, ["transfer", "--auditor", "scripted/transfer_auditor", *common], terminal_width=200)
    assert first.exit_code == 0, first.output
    second = CliRunner().invoke(
        app,
        [
            "transfer",
            "--auditor",
            "scripted/transfer_auditor",
            *common[:2],
            "--behavior",
            "defer_to_users",
            *common[4:],
        ],
        env={"COLUMNS": "80"},
    )
    assert second.exit_code == 0, second.output
    rows = json.loads((tmp_path / RESULTS).read_text())
    assert [(r["behavior"], r["detection"]["mean"], r["audits"]) for r in rows] == [
        ("flattery", 100.0, 2),
        ("defer_to_users", 0.0, 2),
    ]
    assert all(t.target_said() for t in read_transcripts(tmp_path / TRANSCRIPTS))
    assert "Transfer: detection" in second.output
    assert not uncut(second.output), second.output  # every cell was cut at 80 columns


def test_the_transfer_table_fits_80_columns_and_marks_an_unscored_rate(render_80: Callable[..., str]) -> None:
    rows = [
        TransferRow(
            auditor="scripted/transfer_auditor", target="local/runs/implants/flattery-lora-r8-seed0",
            behavior="flattery",
            system_prompt_plant=True, detection=Estimate(mean=100.0, lo=100.0, hi=100.0, n=3),
            top1=Estimate(mean=66.7, lo=0.0, hi=100.0, n=3), audits=4, failed=1, abstained=12, mean_tokens=219.4,
        ),
        TransferRow(
            auditor="local/smollm2", target="local/smollm2", behavior="hardcode_test_cases", system_prompt_plant=False,
            detection=mean_ci([]), top1=mean_ci([]), audits=3, failed=3, abstained=0, mean_tokens=240.0,
        ),
    ]  # fmt: skip
    text = render_80(table(rows))
    for whole in ("[100.0, 100.0]", "[0.0, 100.0]", "66.7", "12 abstained", "1 failed", "3 failed", "219", "240"):
        assert whole in text, whole
    assert "nan" not in text and "-" in text.split("local/smollm2")[1].splitlines()[0]  # no audit scored: "-", not nan


def test_cli_rejects_a_target_without_a_known_behavior(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(transfer)
    app.command("noop")(lambda: None)
    result = CliRunner().invoke(
        app, ["transfer", "--auditor", "scripted/transfer_auditor", "--target", "scripted/denier"]
    )
    assert result.exit_code == 2 and "give its --behavior" in result.output
    result = CliRunner().invoke(
        app, ["transfer", "--auditor", "scripted/transfer_auditor", "--target", "scripted/denier", "--behavior", "nope"]
    )
    assert result.exit_code == 2 and "unknown behavior(s): nope" in result.output
