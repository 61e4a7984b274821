"""Faults injected over real HTTP: judges retry and then abstain explicitly; audits complete or record failures.

The loopback server (auditrl.testing) plays the judge, the auditor and the target through inspect-ai's
`openai-api` provider, answering with malformed verdicts (the judge-output corpus in
`bad_inputs/judge_outputs`), rate limits, server errors, broken bodies, disconnects and hangs.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from crash_lm_child import crash_config  # also puts the trainer tests' fakes on the path
from hostile_models import HostileText, hostile_auditor, hostile_target
from inspect_ai.model import ModelAPI
from tenacity import wait_fixed
from train_fakes import LengthDesign, tiny_policy
from typer.testing import CliRunner

from auditrl.cli import app
from auditrl.models.limits import CallLimits
from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts
from auditrl.testing.openai_server import OpenAIServer, Reply, Responder
from auditrl.train.grpo import train_run

CORPUS = Path(__file__).parent / "bad_inputs"
JUDGE_OUTPUTS = CORPUS / "judge_outputs"
JUDGE_CASES: list[dict[str, str]] = yaml.safe_load((JUDGE_OUTPUTS / "cases.yaml").read_text(encoding="utf-8"))
NONCE = re.compile(r"VERDICT-([0-9a-f]+)-BEGIN")
FOLLOWUPS = 1


def _answering(template: str) -> Responder:
    """A judge that answers every question and follow-up with `template`, its nonce filled in."""

    def respond(body: dict[str, Any]) -> Reply:
        found = NONCE.search(json.dumps(body["messages"][0]))
        return Reply(template.replace("{nonce}", found.group(1) if found else "none"))

    return respond


def _env(monkeypatch: pytest.MonkeyPatch, *servers: OpenAIServer) -> None:
    for server in servers:
        for key, value in server.environ().items():
            monkeypatch.setenv(key, value)


@pytest.mark.parametrize("case", JUDGE_CASES, ids=[c["file"] for c in JUDGE_CASES])
def test_a_malformed_judge_answer_is_retried_then_abstains_explicitly(
    case: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    shutil.copytree(CORPUS / "run", run)
    template = (JUDGE_OUTPUTS / case["file"]).read_text(encoding="utf-8")
    with OpenAIServer(responder=_answering(template)) as judge:
        _env(monkeypatch, judge)
        args = ["judge", "score", str(run), "--design", "concerningness", "--judge", judge.model_spec("judge"),
                "--followups", str(FOLLOWUPS)]  # fmt: skip
        result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and "abstained" in result.output
    assert len(judge.requests) == 1 + FOLLOWUPS  # asked, corrected once, then gave up
    (scored,) = read_transcripts(run / "transcripts.scored-concerningness.jsonl")
    entry = scored.scores["concerningness"]
    assert entry["reward"] is None
    assert case["expect"] in json.dumps(entry), entry


def _faulty(respond: Responder, every: dict[int, Reply]) -> Responder:
    """Inject `every[k]` as the answer to every k-th request (the smallest k that divides the count wins)."""
    counter = itertools.count(1)
    lock = threading.Lock()

    def wrapped(body: dict[str, Any]) -> Reply:
        with lock:
            n = next(counter)
        for k in sorted(every):
            if n % k == 0:
                return every[k]
        return respond(body)

    return wrapped


@pytest.mark.slow
def test_a_suite_run_under_faults_keeps_every_audit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # inspect-ai's backoff (3 s and up) is left out: retries are what is tested, not their waits. The hang still
    # meets the whole timeout.
    monkeypatch.setattr(ModelAPI, "retry_wait", lambda self: wait_fixed(0.05))
    hostile = HostileText.load(tmp_path / "never")
    faults = {
        13: Reply(fault="rate_limit", retry_after_s=0.05),
        17: Reply(fault="server_error"),
        19: Reply(fault="disconnect"),
        23: Reply(fault="malformed_json"),
        29: Reply(fault="truncated_json"),
    }
    hang_once = {41: Reply(fault="hang")}
    with (
        OpenAIServer(responder=_faulty(hostile_auditor(hostile), faults)) as auditor,
        OpenAIServer(responder=_faulty(hostile_target(hostile), {**faults, **hang_once})) as target,
    ):
        _env(monkeypatch, auditor, target)
        run = tmp_path / "suite"
        args = ["suite", "--auditor", auditor.model_spec("auditor"), "--target", target.model_spec("target"),
                "--judge", "programmatic", "--rollouts", "1", "--seeds-per-behavior", "1", "--production-seeds", "1",
                "--max-turns", "7", "--benign-max-turns", "7", "--production-max-turns", "7", "--concurrency", "13",
                "--max-retries", "3", "--timeout", "4", "--out", str(run)]  # fmt: skip
        result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert "Traceback" not in result.output
    transcripts = read_transcripts(run / TRANSCRIPTS)
    assert len(transcripts) == 13, "an audit went missing"
    failed = [t for t in transcripts if t.status == "error"]
    assert all(t.error for t in failed)
    assert result.exit_code == (1 if failed else 0), result.output
    injected = sum(r.reply.fault is not None for r in [*auditor.requests, *target.requests])
    assert injected >= 10 and len(failed) < len(transcripts)
    assert any("timeout" in (t.error or "") for t in failed), "the hung request was not recorded as a failure"
    print(
        f"faults injected: {injected}; audits failed: {len(failed)} of {len(transcripts)}: {[t.error for t in failed]}"
    )


@pytest.mark.slow
def test_a_training_step_against_a_failing_target_keeps_every_rollout(
    tokenizer_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    every_other = _faulty(lambda body: Reply("Glad to help with that."), {2: Reply(fault="server_error")})
    with OpenAIServer(responder=every_other) as target:
        _env(monkeypatch, target)
        cfg = crash_config()
        cfg = cfg.model_copy(
            update={
                "episodes": cfg.episodes.model_copy(
                    update={
                        "target_model": target.model_spec("target"),
                        "target_calls": CallLimits(max_retries=0, timeout=20),
                    }
                ),
                "trainer": cfg.trainer.model_copy(update={"max_steps": 1, "report_to": []}),
            }
        )
        trainer = train_run(
            cfg, tmp_path / "run", design=LengthDesign(), policy=tiny_policy(tokenizer_dir), progress=False
        )
    assert trainer.state.global_step == 1
    stored = read_transcripts(tmp_path / "run" / TRANSCRIPTS)
    assert len(stored) == cfg.data.group_size * cfg.data.groups_per_step, "the batch shrank"
    failed = [t for t in stored if t.status == "error"]
    assert failed and all("500" in (t.error or "") and t.scores["reward"] is None for t in failed)
    assert all(t.scores["reward"] is not None for t in stored if t.status != "error")
