"""`--concurrency N` means N audits in flight against an API, also above inspect-ai's default of 10 connections."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from auditrl.cli import app
from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts
from auditrl.testing.openai_server import OpenAIServer, Reply

LATENCY_S = 1.0


def _peak_overlap(starts: list[float], length: float) -> int:
    """The most requests in flight at once, each lasting `length` from its start."""
    starts = sorted(starts)
    return max(sum(1 for s in starts if start <= s < start + length) for start in starts)


@pytest.mark.slow
@pytest.mark.parametrize("concurrency", [3, 16])
def test_concurrency_is_the_number_of_audits_in_flight(
    concurrency: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    starts: list[float] = []
    lock = threading.Lock()

    def target(body: dict[str, Any]) -> Reply:
        with lock:
            starts.append(time.monotonic())
        return Reply("Happy to help with that.", delay_s=LATENCY_S)

    with OpenAIServer(responder=target) as server:
        for key, value in server.environ().items():
            monkeypatch.setenv(key, value)
        args = ["audit", "--auditor", "scripted/auditor", "--target", server.model_spec(), "--benign",
                "--max-turns", "2", "--rollouts", str(2 * concurrency), "--concurrency", str(concurrency),
                "--out", str(tmp_path), "--no-inspect-log"]  # fmt: skip
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    transcripts = read_transcripts(tmp_path / TRANSCRIPTS)
    assert len(transcripts) == 2 * concurrency and all(t.status != "error" for t in transcripts)
    assert _peak_overlap(starts, LATENCY_S * 0.9) == concurrency
