"""One contract per run directory: one writer at a time (a second refused at once, naming the first; a stale
lock taken over, and said so), a resume of something else refused naming the difference, `--out` never
blank, and audit specs made on demand so that memory does not grow with --rollouts."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from auditrl.behaviors.library import load_seeds
from auditrl.cli import app
from auditrl.cli.audit import build_specs
from auditrl.models.roles import resolve_model
from auditrl.rundir import (
    LOCK,
    OWNER,
    RECORD,
    RunDirError,
    check_contract,
    recorded_behaviors,
    run_dir_lock,
    write_contract,
)
from auditrl.scaffold.runner import OnDemand, audit_jobs, open_run, run_audits
from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts
from auditrl.scaffold.transcript import Budget
from scaffold_fakes import scripted_audit

SCRIPTED = scripted_audit()
SRC = str(Path(__file__).resolve().parents[1] / "src")
HOLDER = """
import sys, time
from pathlib import Path
from auditrl.rundir import run_dir_lock
with run_dir_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(120)
"""


def invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "300"})


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1", "COLUMNS": "300"}


def _pairs(run: Path) -> Counter[tuple[str, int]]:
    return Counter((t.seed_id, t.metadata["rollout"]) for t in read_transcripts(run / TRANSCRIPTS))


def _hold(run: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run)],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_second_writer_is_refused_at_once_naming_the_first_and_a_stale_lock_is_taken_over(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    holder = _hold(run)
    try:
        start = time.monotonic()
        refused = invoke("audit", *SCRIPTED, "--rollouts", "2", "--out", run)
        assert time.monotonic() - start < 30
        assert refused.exit_code == 2 and "Traceback" not in refused.output
        assert f"another process is writing this run directory (pid {holder.pid} on" in " ".join(refused.stderr.split())
        assert not (run / TRANSCRIPTS).exists()
    finally:
        holder.send_signal(signal.SIGKILL)  # dies holding the lock: its owner note stays behind
        holder.wait()
    assert (run / OWNER).is_file()
    taken = invoke("audit", *SCRIPTED, "--rollouts", "2", "--out", run)
    assert taken.exit_code == 0, taken.output
    assert f"took over the lock of pid {holder.pid} on" in " ".join(taken.output.split())
    assert not (run / OWNER).exists() and sorted(_pairs(run).values()) == [1, 1]


def test_two_concurrent_writers_of_one_run_directory_leave_each_audit_once(
    tmp_path: Path,
) -> None:
    """The first writer is a process of its own, the second this one (the lock is between processes; a second
    fresh interpreter would only add its imports)."""
    run = tmp_path / "run"
    args = ["audit", *SCRIPTED, "--rollouts", "20", "--concurrency", "1", "--out", str(run)]
    first = subprocess.Popen(
        [sys.executable, "-m", "auditrl.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    while not (run / OWNER).is_file() and first.poll() is None:  # the first holds the run directory
        time.sleep(0.05)
    second = invoke(*args)
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err[-2000:]
    if second.exit_code == 2:  # still writing: refused at once, naming the first
        assert f"another process is writing this run directory (pid {first.pid} on" in " ".join(second.stderr.split())
    else:  # it finished first: the second resumed a complete run
        assert second.exit_code == 0 and "20 of 20 audit(s) already done, 0 to run" in " ".join(second.stdout.split())
    pairs = _pairs(run)
    assert len(pairs) == 20 and set(pairs.values()) == {1}


def test_a_resume_of_something_else_is_refused_naming_the_difference(
    tmp_path: Path,
) -> None:
    assert invoke("audit", *SCRIPTED, "--rollouts", "1", "--out", tmp_path).exit_code == 0
    before = (tmp_path / TRANSCRIPTS).read_bytes()
    other = [a if a != "sim/steady" else "sim/chatty" for a in SCRIPTED]
    refused = invoke("audit", *other, "--rollouts", "1", "--out", tmp_path)
    assert refused.exit_code == 2, refused.output
    line = " ".join(refused.stderr.split())
    assert "the audit there was run with other settings (target 'sim/steady' there, 'sim/chatty' now)" in line
    assert (tmp_path / TRANSCRIPTS).read_bytes() == before
    with pytest.raises(
        RunDirError,
        match="it holds a run of `auditrl audit`, not of `auditrl transfer`",
    ):
        check_contract(tmp_path, "transfer", {})
    (tmp_path / RECORD).write_text("{torn")
    with pytest.raises(RunDirError, match="its run record cannot be read"):
        check_contract(tmp_path, "audit", {})
    with pytest.raises(RunDirError, match="its run record cannot be read"):
        write_contract(tmp_path, "audit", {})  # never written over
    assert (tmp_path / RECORD).read_text() == "{torn"
    (tmp_path / RECORD).unlink()
    write_contract(tmp_path, "audit", {"target": "x", "behaviors": ("a",)})
    write_contract(tmp_path, "audit", {"target": "x", "behaviors": ["b"]})
    check_contract(tmp_path, "audit", {"target": "x", "behaviors": ["c"]})  # behaviors accumulate
    assert recorded_behaviors(tmp_path) == {"a", "b"}


@pytest.mark.parametrize("out", ["", " ", "\t \n"])
def test_a_blank_out_is_refused_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out: str
) -> None:
    monkeypatch.chdir(tmp_path)
    for command in (
        ["audit", *SCRIPTED],
        ["train", "--config", "cfg.yaml"],
        ["transfer", "--auditor", "scripted/auditor"],
    ):
        result = invoke(*command, "--out", out)
        assert result.exit_code == 2 and "give a directory name" in " ".join(result.output.split()), result.output
        assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_the_lock_is_given_up_however_the_block_ends(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), run_dir_lock(tmp_path):
        raise RuntimeError("stopped")
    assert not (tmp_path / OWNER).exists()
    with (
        run_dir_lock(tmp_path),
        pytest.raises(RunDirError, match=f"pid {os.getpid()} on"),
    ):
        open_run(tmp_path / TRANSCRIPTS)
    assert (tmp_path / LOCK).exists() and not (tmp_path / OWNER).exists()


ROLLOUTS = 100_000


def test_a_hundred_thousand_rollouts_start_their_first_audit_at_once_in_little_memory() -> None:
    seeds = load_seeds(behavior="general")[:3]
    auditor, target = "scripted/auditor", "sim/steady"
    started: list[float] = []

    async def first_audit(config: Any) -> Any:
        started.append(time.perf_counter())
        await asyncio.sleep(3600)

    async def main(begin: float) -> None:
        specs = build_specs(None, seeds, ROLLOUTS, Budget(max_turns=2), auditor, target, "native")
        jobs = audit_jobs(specs, resolve_model(auditor), resolve_model(target))
        waiting = OnDemand(len(jobs), lambda i: replace(jobs[i], run=first_audit))
        run = asyncio.create_task(run_audits(waiting, None, concurrency=4))
        while not started:
            await asyncio.sleep(0.001)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    tracemalloc.start()
    begin = time.perf_counter()
    try:
        asyncio.run(main(begin))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert started[0] - begin < 2.0, f"first audit after {started[0] - begin:.2f} s"
    print(f"first audit after {started[0] - begin:.3f} s, {peak / 2**20:.1f} MiB allocated at the peak")
    assert peak < 30 * 2**20, f"{peak / 2**20:.1f} MiB allocated before the first audit"


def test_a_training_run_directory_has_one_writer_too(tmp_path: Path) -> None:
    run = tmp_path / "run"
    holder = _hold(run)
    try:
        config = Path(__file__).resolve().parents[1] / "configs" / "auditworld.yaml"
        refused = invoke("train", "--config", config, "--out", run)
        assert refused.exit_code == 2, refused.output
        assert f"another process is writing this run directory (pid {holder.pid} on" in " ".join(refused.stderr.split())
        assert sorted(p.name for p in run.iterdir()) == [LOCK, OWNER]
    finally:
        holder.kill()
        holder.wait()
