"""`auditrl audit` against API targets that fail: bounded by --max-retries/--timeout, retries shown, failures
summed up."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from auditrl.cli.audit import audit
from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts
from auditrl.testing.openai_server import OpenAIServer, Reply

app = typer.Typer()
app.command()(audit)


def run_audit_cli(target: str, out: Path, *extra: str) -> tuple[int, str]:
    args = ["--auditor", "scripted/auditor", "--target", target, "--benign", "--max-turns", "3"]
    result = CliRunner().invoke(app, [*args, "--out", str(out), "--no-inspect-log", *extra], terminal_width=200)
    return result.exit_code, result.output


@pytest.mark.slow
def test_a_closed_loopback_port_fails_within_the_bound_with_a_clear_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("CLOSEDPORT_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("CLOSEDPORT_API_KEY", "dummy")
    start = time.monotonic()
    code, output = run_audit_cli(
        "openai-api/closedport/m", tmp_path, "--rollouts", "2", "--max-retries", "0", "--timeout", "5"
    )
    assert time.monotonic() - start < 8
    assert code == 1, output
    assert "2 audit(s) failed" in output and "APIConnectionError" in output
    assert "target model openai-api/closedport/m failed" in output
    transcripts = read_transcripts(tmp_path / TRANSCRIPTS)
    assert [t.status for t in transcripts] == ["error", "error"] and all(
        "APIConnectionError" in (t.error or "") for t in transcripts
    )


def test_retries_show_in_the_progress_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIServer([Reply(fault="rate_limit", retry_after_s=0.1)], default=Reply("Happy to help.")) as server:
        for key, value in server.environ().items():
            monkeypatch.setenv(key, value)
        code, output = run_audit_cli(server.model_spec(), tmp_path)
    assert code == 0, output
    assert "retry" in output and "attempt 1 failed (rate limited (429))" in output
    assert server.requests[0].reply.fault == "rate_limit" and server.requests[1].reply.fault is None
    (transcript,) = read_transcripts(tmp_path / TRANSCRIPTS)
    assert transcript.status != "error" and "Happy to help." in [m.content for m in transcript.target_said()]
