"""Checkpoints and crash-safe resume: adapter/optimizer/RNG restored, no transcript lost or duplicated."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file
from train_fakes import FakeEpisode, LengthDesign, rows_for, tiny_config, tiny_policy

from auditrl.analysis.monitors import read_monitors
from auditrl.scaffold.store import SUPERSEDED, TRANSCRIPTS, append_transcript
from auditrl.scaffold.transcript import Transcript
from auditrl.train.checkpoint import (
    STATE_FILE,
    TranscriptLog,
    latest_checkpoint,
    rollout_key,
)
from auditrl.train.grpo import train_run


def _transcript(step: int, index: int) -> Transcript:
    return Transcript(
        auditor_model="a",
        target_model="t",
        seed_id="s",
        seed_instructions="x",
        metadata={"step": step, "rollout": index},
    )


def test_log_dedupes_and_rewinds(tmp_path: Path) -> None:
    log = TranscriptLog(tmp_path)
    assert log.append(_transcript(0, 0)) and log.append(_transcript(0, 1)) and log.append(_transcript(1, 0))
    assert not log.append(_transcript(0, 1))
    with (tmp_path / TRANSCRIPTS).open("a") as f:
        f.write('{"id": "torn", "auditor_mo')
    reopened = TranscriptLog(tmp_path)
    assert reopened.keys == {(0, 0), (0, 1), (1, 0)}
    assert reopened.rewind(1) == 1
    kept = [json.loads(line) for line in (tmp_path / TRANSCRIPTS).read_text().splitlines()]
    assert [(t["metadata"]["step"], t["metadata"]["rollout"]) for t in kept] == [(0, 0), (0, 1)]
    moved = Transcript.model_validate_json((tmp_path / SUPERSEDED).read_text().splitlines()[0])
    assert rollout_key(moved) == (1, 0)
    assert reopened.append(_transcript(1, 0))


def _run(cfg: object, run_dir: Path, tokenizer_dir: Path) -> object:
    return train_run(
        cfg,  # type: ignore[arg-type]
        run_dir,
        factory=lambda row: FakeEpisode(row, turns=2),
        design=LengthDesign(),
        rows=rows_for(steps=2, groups=2),
        policy=tiny_policy(tokenizer_dir),
        progress=False,
    )


def test_resume_after_crash(tokenizer_dir: Path, tmp_path: Path) -> None:
    cfg = tiny_config(max_steps=2, save_steps=1)
    run_dir = tmp_path / "run"
    _run(cfg, run_dir, tokenizer_dir)
    last = latest_checkpoint(run_dir)
    assert last is not None and last.name == "checkpoint-2"
    for name in ("adapter_model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", STATE_FILE):
        assert (last / name).is_file(), name
    uninterrupted = load_file(str(last / "adapter_model.safetensors"))

    # crash: step 2's checkpoint never written, its transcripts were, and a write was torn
    shutil.rmtree(last)
    append_transcript(run_dir / TRANSCRIPTS, _transcript(1, 0))  # a stray duplicate of a step-1 rollout
    with (run_dir / TRANSCRIPTS).open("a") as f:
        f.write('{"id": "torn", "scor')

    trainer = _run(cfg, run_dir, tokenizer_dir)
    assert trainer.state.global_step == 2  # type: ignore[attr-defined]
    keys = [
        rollout_key(Transcript.model_validate_json(line)) for line in (run_dir / TRANSCRIPTS).read_text().splitlines()
    ]
    assert sorted(keys) == [(s, i) for s in range(2) for i in range(4)]
    superseded = (run_dir / SUPERSEDED).read_text().splitlines()
    assert len(superseded) == 5 and all(json.loads(line)["metadata"]["step"] == 1 for line in superseded)
    assert [r["step"] for r in read_monitors(run_dir)] == [0, 1]
    resumed = load_file(str(latest_checkpoint(run_dir) / "adapter_model.safetensors"))  # type: ignore[operator]
    for name, tensor in uninterrupted.items():
        torch.testing.assert_close(resumed[name], tensor)
