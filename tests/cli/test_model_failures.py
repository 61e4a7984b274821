"""One way to fail a model call, on every command that calls models: the same checks as `models check` before any
audit (one line, exit 2), and one exit-code rule after (0 all completed, 1 with the count when any failed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from auditrl.cli import app
from auditrl.testing.openai_server import OpenAIServer, Reply

COMMANDS: dict[str, list[str]] = {
    "audit": ["audit", "--benign", "--rollouts", "2", "--max-turns", "2"],
    "suite": [
        "suite",
        "--judge",
        "programmatic",
        "--rollouts",
        "1",
        "--seeds-per-behavior",
        "1",
        "--production-seeds",
        "0",
    ],
    "transfer": ["transfer", "--behavior", "flattery", "--rollouts", "2", "--token-budget", "40"],
}
"""A command that calls an auditor and a target, with the options that keep its run small."""
AUDITOR = {"audit": "scripted/auditor", "suite": "scripted/auditor", "transfer": "scripted/transfer_auditor"}
MISSING: dict[str, tuple[str, str]] = {
    "missing key": ("anthropic/claude-haiku-4-5", "ANTHROPIC_API_KEY is not set"),
    "missing local model": ("local/nope/nothing", "local model 'nope/nothing' not found"),
    "unknown provider": ("opnai/gpt-4o", "unknown model provider 'opnai' (did you mean 'openai'?)"),
}


def invoke(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args, terminal_width=300)
    return result.exit_code, result.output


@pytest.mark.parametrize("problem", sorted(MISSING))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_model_that_cannot_be_called_stops_the_command_before_any_audit(
    command: str, problem: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    spec, says = MISSING[problem]
    code, output = invoke([*COMMANDS[command], "--auditor", AUDITOR[command], "--target", spec, "--out", str(tmp_path)])
    assert code == 2, output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: --target {spec}: {says}") and "fix:" in lines[0], output
    assert "[bold]" not in output and "Traceback" not in output
    assert not any(tmp_path.iterdir()), "nothing is written by a command refused before its first audit"


def test_models_check_says_when_the_local_model_file_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("auditrl.models.local.smollm2_candidates", lambda: [tmp_path / "nowhere" / "model.gguf"])
    code, output = invoke(["models", "check", "local/smollm2"])
    assert code == 1
    assert "FAIL local/smollm2: the model file" in output and "is not installed" in output
    assert "resolves" not in output


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_failed_audits_exit_1_with_the_count_and_a_refused_key_is_asked_once(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OpenAIServer(default=Reply("Incorrect API key provided", fault="error_status", status=401)) as server:
        for key, value in server.environ().items():
            monkeypatch.setenv(key, value)
        args = [
            *COMMANDS[command],
            "--auditor",
            AUDITOR[command],
            "--target",
            server.model_spec(),
            "--out",
            str(tmp_path),
        ]
        code, output = invoke([*args, "--concurrency", "1"])  # calls in flight when the refusal comes are made
        assert code == 1, output
        assert " audit(s) failed (the reasons are listed above" in output
        assert "refused the credentials" in output and f"auditrl models check {server.model_spec()}" in output
        assert len(server.requests) == 1, "a refused key is not retried, and no later audit calls the model again"
