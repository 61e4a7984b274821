"""The experiment's warm start: the verdict weighting of free reports and the refusals of its `sft` command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_sft import teacher_batch as teacher_batch  # the fixture, shared
from typer.testing import CliRunner

from auditrl.experiments.small_lm.choice_sft import VerdictWeighting
from auditrl.experiments.small_lm.cli import app
from auditrl.experiments.small_lm.report_grammar import IGNORED, verdict_index, verdict_token_ids
from auditrl.train.sft import training_examples

CONFIGS = Path(__file__).resolve().parents[3] / "configs" / "experiments" / "small_lm"


def test_the_weighted_verdict_word_is_the_reports_no_behavior_found_value(teacher_batch: Any) -> None:
    *_, segments, batch = teacher_batch
    verdicts = verdict_token_ids(segments.tokenizer)
    examples = training_examples(batch, "parsed")
    said = [
        segments.tokenizer.decode([e["labels"][i]]).strip()
        for e in examples
        if (i := verdict_index(e["labels"], verdicts)) is not None
    ]
    truth = [str(t.report.no_behavior_found).lower() for t in batch.transcripts if t.report is not None]
    assert said == truth and {"true", "false"} == set(said)  # claims and clean reports both, or this shows little
    assert verdict_index([IGNORED, 5, 7, IGNORED], verdicts) is None
    weighting = VerdictWeighting(segments.tokenizer, 1, 20.0)
    assert weighting.record(examples) == {"verdicts": len(examples)}
    assert all(weighting.token_weights(e["labels"]) == {verdict_index(e["labels"], verdicts): 20.0} for e in examples)
    unweighable = [{**e, "labels": [IGNORED if t in verdicts else t for t in e["labels"]]} for e in examples]
    assert VerdictWeighting(segments.tokenizer, 1, 1.0).record(unweighable) == {
        "verdicts": 0
    }  # weight 1 changes nothing
    with pytest.raises(ValueError, match="verdict_weight 20.0"):
        weighting.record(unweighable)


def test_the_command_refuses_weights_that_change_nothing_in_one_line_before_any_model_loads(tmp_path: Path) -> None:
    free, grammar = CONFIGS / "cpu_learn_sft.yaml", CONFIGS / "cpu_learn_evidence.yaml"
    cases = [
        (["--config", str(free), "--claim-weight", "3"], "match_lengths weigh the sentences of a report grammar"),
        (["--config", str(free), "--match-lengths"], "match_lengths weigh the sentences of a report grammar"),
        (["--config", str(grammar), "--verdict-weight", "3"], "claim_weight weighs the claims"),
        (["--config", str(grammar), "--teacher", "mock/x"], "the teacher only probes"),
    ]
    for args, message in cases:
        result = CliRunner().invoke(app, ["sft", *args, "--out", str(tmp_path / "out")], terminal_width=200)
        assert result.exit_code == 2 and message in result.output, result.output
        assert not (tmp_path / "out").exists()
