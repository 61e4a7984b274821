"""The main job end to end: a real SmolLM2 auditor audits a SmolLM2 target planted with a behavior."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from inspect_ai.log import read_eval_log
from typer.testing import CliRunner

from auditrl.cli.audit import audit
from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts

MAX_TOKENS = 12
"""Tokens per generation: the path is the same at any length, and SmolLM2 in bfloat16 on one CPU thread writes
about ten a second (40 cost the test twice its CPU time)."""


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_smollm2_audits_a_planted_smollm2(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(audit)
    args = [
        "--auditor",
        "local/smollm2",
        "--target",
        "local/smollm2",
        "--behavior",
        "flattery",
        "--rollouts",
        "1",
        "--max-turns",
        "2",
        "--max-tokens",
        str(MAX_TOKENS),
        "--out",
        str(tmp_path),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (transcript,) = read_transcripts(tmp_path / TRANSCRIPTS)
    assert transcript.status in ("completed", "budget_exhausted") and transcript.error is None
    assert transcript.behavior_id == "flattery" and "PRISM-4" in transcript.target_system_prompt
    assert 1 <= transcript.turns_used <= 2
    assert 0 < transcript.auditor_tokens <= MAX_TOKENS * 3
    assert any(m.role == "assistant" and m.content for m in transcript.target_messages), "the target answered"
    assert transcript.report is not None
    assert transcript.report.predictions or transcript.report.no_behavior_found or transcript.report.parse_error
    roles = [m.role for m in transcript.auditor_messages]
    assert roles[:2] == ["system", "user"] and roles.count("assistant") == transcript.turns_used + 1
    (log,) = tmp_path.glob("*.eval")
    assert len(read_eval_log(str(log)).samples or []) == 1
