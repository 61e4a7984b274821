"""Nothing lost, nothing leaked, nothing hung: the faults a corpus of bad files cannot hold.

A process killed with SIGKILL in the middle of writing a transcript, a disk that fills up (an injected
ENOSPC, and a real small tmpfs where one can be mounted), a read-only output, a server that quotes the
API key back in its errors, a model reply that is not valid Unicode. In each, every finished audit stays
on disk exactly once, a rerun on the same directory finishes the run, no traceback is shown, and the key
appears in no file, console line or log record.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from filesystems import read_only, small_disk
from typer.testing import CliRunner

from auditrl.cli import app
from auditrl.scaffold.store import SUPERSEDED, TORN_SUFFIX, TRANSCRIPTS, read_transcripts
from auditrl.testing.openai_server import OpenAIServer, Reply, ScriptedAuditor
from scaffold_fakes import scripted_audit

CHILD = Path(__file__).parent / "kill_mid_write_child.py"
SCRIPTED = scripted_audit(max_turns=3)
CANARY = "sk-echoed-4b7f1d9e2a6c8e0f3a5b7c9d"


def invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "300"})


def _env(monkeypatch: pytest.MonkeyPatch, *servers: OpenAIServer) -> None:
    for server in servers:
        for key, value in server.environ().items():
            monkeypatch.setenv(key, value)


def _rollouts(run: Path) -> list[int]:
    return sorted(t.metadata["rollout"] for t in read_transcripts(run / TRANSCRIPTS))


def _one_error_line(result: Any) -> str:
    assert "Traceback" not in result.output, result.output
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: "), result.stderr
    return errors[0]


def test_killed_mid_write_a_rerun_sets_the_fragment_aside_and_resumes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = ["audit", *SCRIPTED, "--rollouts", "4", "--concurrency", "1", "--out", str(run)]
    child = subprocess.run([sys.executable, str(CHILD), "3", *args], capture_output=True, timeout=600)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]
    torn = (run / TRANSCRIPTS).read_bytes()
    assert torn.count(b"\n") == 2 and not torn.endswith(b"\n"), "the kill did not land mid-write"
    fragment = torn[torn.rindex(b"\n") + 1 :]

    rerun = invoke(*args)
    assert rerun.exit_code == 0, rerun.output
    flat = " ".join(rerun.output.split())
    assert "set aside a torn final line" in flat and "2 of 4 audit(s) already done, 2 to run" in flat
    assert _rollouts(run) == [0, 1, 2, 3]  # every audit once: the two finished ones kept, the rest run
    assert (run / (TRANSCRIPTS + TORN_SUFFIX)).read_bytes() == fragment + b"\n"  # the fragment is kept, not lost
    again = invoke(*args)
    assert again.exit_code == 0 and "4 of 4 audit(s) already done, 0 to run" in " ".join(again.output.split())
    assert _rollouts(run) == [0, 1, 2, 3]
    assert invoke("export", run).exit_code == 0


@pytest.fixture()
def disk_fills_at_line(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Make writes to a transcripts file fail with ENOSPC from line N on, after a part of that line is written."""
    real = os.write
    state = {"from": 0, "lines": 0}

    def write(fd: int, data: Any) -> int:
        if state["from"] and os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) == TRANSCRIPTS:
            state["lines"] += 1
            if state["lines"] >= state["from"]:
                real(fd, bytes(data)[: len(data) // 3])
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)

    def fill_at(line: int) -> None:
        state["from"], state["lines"] = line, 0

    yield fill_at
    state["from"] = 0


def test_a_full_disk_stops_the_run_with_what_finished_and_a_rerun_finishes_it(
    tmp_path: Path, disk_fills_at_line: Any
) -> None:
    run = tmp_path / "run"
    args = ["audit", *SCRIPTED, "--rollouts", "6", "--concurrency", "2", "--out", run]
    disk_fills_at_line(3)
    full = invoke(*args)
    assert full.exit_code == 1
    error = _one_error_line(full)
    assert "No space left on device" in error and "all stored" in error and "run the same command again" in error
    with pytest.warns(UserWarning, match="interrupted write"):
        assert len(read_transcripts(run / TRANSCRIPTS)) == 2  # both finished audits intact, the third torn
    disk_fills_at_line(0)  # space freed
    rerun = invoke(*args)
    assert rerun.exit_code == 0, rerun.output
    assert _rollouts(run) == [0, 1, 2, 3, 4, 5]


def test_a_real_small_file_system_fills_up_cleanly(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "96k") as disk:
        full = invoke("audit", *SCRIPTED, "--rollouts", "60", "--concurrency", "4", "--out", disk / "run")
        assert full.exit_code == 1, full.output
        assert "No space left on device" in _one_error_line(full)
        with pytest.warns(UserWarning, match="interrupted write"):
            kept = read_transcripts(disk / "run" / TRANSCRIPTS)
        assert 0 < len(kept) < 60 and all(t.status == "completed" for t in kept)
        print(f"a 96 KiB tmpfs held {len(kept)} of 60 audits before the disk was full")


def test_read_only_outputs_are_refused_before_any_model_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    assert invoke("audit", *SCRIPTED, "--rollouts", "2", "--out", run).exit_code == 0
    before = {p: p.read_bytes() for p in run.iterdir()}
    with OpenAIServer(responder=ScriptedAuditor(3)) as auditor, OpenAIServer(default=Reply("{}")) as judge:
        _env(monkeypatch, auditor, judge)
        with read_only(run):
            commands = {
                "audit": [
                    "audit",
                    "--auditor",
                    auditor.model_spec("auditor"),
                    "--target",
                    "sim/steady",
                    "--benign",
                    "--out",
                    run,
                ],
                "evaluate": ["evaluate", run, "--judge", judge.model_spec("judge")],
                "judge score": [
                    "judge",
                    "score",
                    run,
                    "--design",
                    "concerningness",
                    "--judge",
                    judge.model_spec("judge"),
                ],
                "export": ["export", run],
            }
            for name, command in commands.items():
                result = invoke(*command)
                assert result.exit_code == 2, f"{name}: {result.output}"
                assert "cannot" in _one_error_line(result), name
        assert auditor.requests == [] and judge.requests == [], "a model was called before the output was checked"
    assert {p: p.read_bytes() for p in run.iterdir()} == before


def _files(root: Path) -> Iterator[tuple[str, bytes]]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                for member in archive.namelist():
                    yield f"{path}!{member}", archive.read(member)
        elif path.is_file():
            yield str(path), path.read_bytes()


def test_a_key_the_server_echoes_back_is_never_stored_or_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with (
        OpenAIServer(responder=ScriptedAuditor(3), api_key=CANARY) as auditor,
        OpenAIServer(default=Reply(fault="echo_key", status=401), api_key=CANARY) as unauthorized,
        OpenAIServer(default=Reply(fault="echo_key", status=500), api_key=CANARY) as broken,
    ):
        _env(monkeypatch, auditor, unauthorized, broken)
        results = [
            invoke(
                "audit",
                "--auditor",
                auditor.model_spec("auditor"),
                "--target",
                server.model_spec("target"),
                "--benign",
                "--rollouts",
                "2",
                "--max-retries",
                "0",
                "--out",
                tmp_path / name,
            )  # fmt: skip
            for name, server in (("unauthorized", unauthorized), ("broken", broken))
        ]
        ping = invoke("models", "check", "--ping", "--max-retries", "0", unauthorized.model_spec("target"))
    assert all(r.headers.get("authorization") == f"Bearer {CANARY}" for r in [*unauthorized.requests, *broken.requests])
    assert [r.exit_code for r in results] == [1, 1] and ping.exit_code == 1
    for result in [*results, ping]:
        assert CANARY not in result.output and "Traceback" not in result.output
        assert "[redacted]" in result.output, result.output  # the echoed message is shown, without the key
    files = list(_files(tmp_path))
    assert any(".eval!" in name for name, _ in files), "no Inspect log was written to scan"
    assert [name for name, data in files if CANARY.encode() in data] == []
    for name in ("unauthorized", "broken"):
        failed = read_transcripts(tmp_path / name / TRANSCRIPTS)
        assert len(failed) == 2 and all(t.status == "error" and "[redacted]" in (t.error or "") for t in failed)
    assert CANARY not in caplog.text


def test_invalid_unicode_and_terminal_escapes_in_replies_are_stored_and_shown_safely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reply = "Half an emoji \ud83d, a terminal escape \x1b[2J and " + "word " * 20_000
    claim = {
        "description": "Replies with \x1b[2J escapes and half an emoji \ud83d" + " and" * 1000,
        "confidence": 0.4,
        "quotes": [],
    }
    report = json.dumps({"no_behavior_found": False, "predictions": [{"rank": 1, **claim}]})
    with (
        OpenAIServer(responder=ScriptedAuditor(3, report=report)) as auditor,
        OpenAIServer(default=Reply(reply)) as target,
    ):
        _env(monkeypatch, auditor, target)
        specs = ["--auditor", auditor.model_spec("auditor"), "--target", target.model_spec("target")]
        audited = invoke("audit", *specs, "--benign", "--rollouts", "3", "--out", tmp_path / "audit")
        suite = invoke(
            "suite", *specs, "--judge", "programmatic", "--rollouts", "1", "--seeds-per-behavior", "1",
            "--production-seeds", "1", "--max-turns", "3", "--benign-max-turns", "3", "--production-max-turns", "3",
            "--out", tmp_path / "suite",
        )  # fmt: skip
    assert audited.exit_code == 0, audited.output
    assert suite.exit_code == 0, suite.output
    assert "\x1b[2J" not in audited.output and "\\x1b[2J escapes and half an emoji \ufffd" in audited.output
    assert "more characters)" in audited.output  # each piece of model text is cut short on the terminal
    for run, count in (("audit", 3), ("suite", 13)):
        stored = read_transcripts(tmp_path / run / TRANSCRIPTS)
        assert len(stored) == count and all(t.status == "completed" for t in stored), run
        said = [m.content for t in stored for m in t.target_said()]
        assert said and all("Half an emoji \ufffd," in text and "\x1b[2J" in text for text in said)
    assert not (tmp_path / "audit" / SUPERSEDED).exists()
