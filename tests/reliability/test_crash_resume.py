"""Training killed with SIGKILL (mid-step and mid-checkpoint-save), then resumed, loses and repeats nothing."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer

from auditrl.models.local import smollm2_source
from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts
from auditrl.train.checkpoint import CHECKPOINTS_DIR, SUPERSEDED_FILE, is_complete, latest_checkpoint, rollout_key
from auditrl.train.monitors import read_monitors
from auditrl.train.snapshot import SNAPSHOTS_DIR

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
LM_STEPS = 3
LM_ROLLOUTS_PER_STEP = 4
LM_REFRESH_STEPS = 2
KILL_SEED = 12


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = smollm2_source()
    folder = tmp_path_factory.mktemp("smollm2-tokenizer")
    AutoTokenizer.from_pretrained(source.location, gguf_file=source.gguf_file).save_pretrained(folder)
    return folder


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

    final = _start(argv, log)
    assert final.wait(timeout=900) == 0, log.read_text()[-3000:]

    stored = read_transcripts(run / TRANSCRIPTS)
    keys = [rollout_key(t) for t in stored]
    assert sorted(keys) == [(s, i) for s in range(LM_STEPS) for i in range(LM_ROLLOUTS_PER_STEP)]
    assert all(t.status != "error" and t.scores["reward"] is not None for t in stored)
    assert read_transcripts(run / SUPERSEDED_FILE), "the killed runs' rollouts were not kept aside"
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
