"""`auditrl evaluate` and `auditrl judge score` follow the exit-code rule when they call a model judge: 0 when every
verdict was given, 1 with the count in one line when judge calls failed (what was written is kept)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from auditrl.cli import app
from auditrl.testing.openai_server import OpenAIServer, Reply


def invoke(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args, terminal_width=300)
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def transcripts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two finished audits of a simulated target, with no suite verdicts yet."""
    out = tmp_path_factory.mktemp("audit")
    args = [
        "audit",
        "--auditor",
        "scripted/auditor",
        "--target",
        "sim/steady",
        "--benign",
        "--rollouts",
        "2",
        "--max-turns",
        "2",
    ]
    code, output = invoke([*args, "--out", str(out)])
    assert code == 0, output
    return out / "transcripts.jsonl"


COMMANDS: dict[str, list[str]] = {
    "evaluate": ["evaluate"],
    "judge score": ["judge", "score", "--design", "concerningness"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_failed_judge_calls_exit_1_with_the_count(
    command: str, transcripts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "transcripts.jsonl"
    run.write_bytes(transcripts.read_bytes())
    with OpenAIServer(default=Reply("Incorrect API key provided", fault="error_status", status=401)) as server:
        for key, value in server.environ().items():
            monkeypatch.setenv(key, value)
        code, output = invoke([*COMMANDS[command], str(run), "--judge", server.model_spec()])
    assert code == 1, output
    last = [line for line in output.splitlines() if line.strip()][-1]
    assert last.startswith("error: ") and " judge verdict(s) failed (the reasons are listed above" in last, output
    failed, _, total = last.removeprefix("error: ").split(" ")[:3]
    assert 0 < int(failed) <= int(total), last
    assert "Traceback" not in output


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_judge_that_gave_every_verdict_exits_0(command: str, transcripts: Path, tmp_path: Path) -> None:
    run = tmp_path / "transcripts.jsonl"
    run.write_bytes(transcripts.read_bytes())
    code, output = invoke([*COMMANDS[command], str(run), "--judge", "programmatic"])
    assert code == 0, output
    assert "failed" not in output
