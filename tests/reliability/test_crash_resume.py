"""Training killed with SIGKILL (mid-step and mid-checkpoint-save), then resumed, loses and repeats nothing.

AuditWorld, killed at seeded points between and inside its training runs, must end with the same results as an
uninterrupted job with the same config; the LM trainer must store every rollout exactly once. Only the runs to be
killed get a process of their own; the uninterrupted job and the final resume run in this one (a fresh interpreter
costs more CPU in imports than a tiny run's training).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from crash_lm_child import crash_config  # also puts the trainer tests' fakes on the path
from safetensors.torch import load_file
from train_fakes import tiny_policy
from typer.testing import CliRunner

from auditrl.analysis.monitors import read_monitors
from auditrl.auditworld.job.checkpoints import CHECKPOINTS
from auditrl.cli import app
from auditrl.scaffold.store import SUPERSEDED, TRANSCRIPTS, read_transcripts
from auditrl.train.checkpoint import CHECKPOINTS_DIR, is_complete, latest_checkpoint, rollout_key
from auditrl.train.grpo import train_run
from auditrl.train.snapshot import SNAPSHOTS_DIR

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
LM_STEPS = 3
LM_ROLLOUTS_PER_STEP = 4
LM_REFRESH_STEPS = 2
KILL_SEED = 12
AUDITWORLD_CONFIG = HERE / "data" / "auditworld_tiny.yaml"
AUDITWORLD_RUNS = 6  # checkpoint files of that config: bases (2 seeds) and designs x seeds
TIMING_KEYS = frozenset({"seconds", "cpu_seconds", "runtime_seconds", "throughput_episodes_per_cpu_second"})


def _start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, *argv], env=env, stdout=out, stderr=subprocess.STDOUT)


def _kill_when(process: subprocess.Popen[bytes], ready: Callable[[], bool], log: Path, limit_s: float = 600) -> None:
    """SIGKILL the process as soon as `ready()` holds; it must still be running then."""
    deadline = time.monotonic() + limit_s
    while not ready():
        assert process.poll() is None, f"finished before the kill point:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "kill point never reached"
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL


def _without_timings(value: Any) -> Any:
    """A results.json value with wall-clock figures removed (they differ between any two runs)."""
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _finished_runs(run: Path) -> int:
    folder = run / CHECKPOINTS
    return len(list(folder.glob("*.json"))) if folder.is_dir() else 0


@pytest.mark.slow
def test_auditworld_killed_twice_ends_with_the_uninterrupted_result(tmp_path: Path) -> None:
    log = tmp_path / "child.log"
    whole, killed = tmp_path / "whole", tmp_path / "killed"

    def argv(out: Path) -> list[str]:
        return ["-m", "auditrl.cli", *train(out)]

    def train(out: Path) -> list[str]:
        return ["train", "--config", str(AUDITWORLD_CONFIG), "--out", str(out)]

    uninterrupted = CliRunner().invoke(app, train(whole))
    assert uninterrupted.exit_code == 0, uninterrupted.output[-3000:]
    rng = random.Random(KILL_SEED)
    first = rng.randint(1, AUDITWORLD_RUNS - 2)
    _kill_when(_start(argv(killed), log), lambda: _finished_runs(killed) >= first, log)
    second = rng.randint(first + 1, AUDITWORLD_RUNS - 1)
    _kill_when(_start(argv(killed), log), lambda: _finished_runs(killed) >= second, log)
    assert not (killed / "results.json").exists()
    done_before = {p: p.stat().st_mtime_ns for p in (killed / CHECKPOINTS).glob("*.json")}
    resumed_run = CliRunner().invoke(app, train(killed))
    assert resumed_run.exit_code == 0, resumed_run.output[-3000:]
    assert {p: p.stat().st_mtime_ns for p in done_before} == done_before, "finished runs were trained again"

    expected = json.loads((whole / "results.json").read_text(encoding="utf-8"))
    resumed = json.loads((killed / "results.json").read_text(encoding="utf-8"))
    assert _without_timings(resumed) == _without_timings(expected)
    assert len(read_transcripts(killed / TRANSCRIPTS)) == len(read_transcripts(whole / TRANSCRIPTS))


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.is_file() else 0


@pytest.mark.slow
def test_lm_training_killed_mid_save_and_mid_step_resumes_exactly(tokenizer_dir: Path, tmp_path: Path) -> None:
    run, log = tmp_path / "run", tmp_path / "child.log"
    argv = [str(HERE / "crash_lm_child.py"), str(run), str(tokenizer_dir)]

    _kill_when(_start(argv, log), lambda: (run / "saving-2").exists(), log)
    partial = run / CHECKPOINTS_DIR / "checkpoint-2"
    assert partial.is_dir() and not is_complete(partial), "the kill did not land inside the save"
    assert latest_checkpoint(run) == run / CHECKPOINTS_DIR / "checkpoint-1"

    written = _lines(run / TRANSCRIPTS)
    k = random.Random(KILL_SEED).randint(1, LM_ROLLOUTS_PER_STEP)
    _kill_when(_start(argv, log), lambda: _lines(run / TRANSCRIPTS) >= written - LM_ROLLOUTS_PER_STEP + k, log)

    train_run(crash_config(), run, policy=tiny_policy(tokenizer_dir), progress=False)  # the resume that finishes

    stored = read_transcripts(run / TRANSCRIPTS)
    keys = [rollout_key(t) for t in stored]
    assert sorted(keys) == [(s, i) for s in range(LM_STEPS) for i in range(LM_ROLLOUTS_PER_STEP)]
    assert all(t.status != "error" and t.scores["reward"] is not None for t in stored)
    assert read_transcripts(run / SUPERSEDED), "the killed runs' rollouts were not kept aside"
    assert [r["step"] for r in read_monitors(run)] == list(range(LM_STEPS))
    checkpoints = sorted((run / CHECKPOINTS_DIR).glob("checkpoint-*"))
    assert checkpoints and all(is_complete(c) for c in checkpoints)
    last = latest_checkpoint(run)
    assert last is not None and last.name == f"checkpoint-{LM_STEPS}"
    snapshots = sorted(p.name for p in (run / SNAPSHOTS_DIR).iterdir())
    assert snapshots == [f"step-{s:06d}.safetensors" for s in range(0, LM_STEPS, LM_REFRESH_STEPS)]
    taken = load_file(str(run / SNAPSHOTS_DIR / f"step-{LM_REFRESH_STEPS:06d}.safetensors"))
    saved = load_file(str(run / CHECKPOINTS_DIR / f"checkpoint-{LM_REFRESH_STEPS}" / "adapter_model.safetensors"))
    assert len(taken) == len(saved)
    for (_, a), (_, b) in zip(sorted(taken.items()), sorted(saved.items()), strict=True):
        assert torch.equal(a, b), "the reference snapshot differs from the checkpoint's adapter at its step"
