"""Training stops at the first non-finite loss or weight with a clear error, and writes no results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from transformers import TrainerControl, TrainerState, TrainingArguments
from typer.testing import CliRunner

import auditrl.auditworld.training
from auditrl.auditworld.base import RandomInit
from auditrl.auditworld.training import TrainConfig, train
from auditrl.auditworld.world import World
from auditrl.behaviors.library import load_behaviors
from auditrl.cli import app
from auditrl.finite import NonFiniteTrainingError
from auditrl.train.checkpoint import StopOnNonFinite

TINY = Path(__file__).resolve().parent / "reliability" / "data" / "auditworld_tiny.yaml"


def _nan_from_step(monkeypatch: pytest.MonkeyPatch, first_bad: int) -> None:
    """AuditWorld's loss turns NaN from step `first_bad` on, as a diverging update would make it; steps are counted
    per policy, since runs trained in lockstep interleave their updates."""
    real = auditrl.auditworld.training.policy_gradient
    calls: dict[int, int] = {}

    def gradient(*args: Any) -> tuple[float, list[np.ndarray]]:
        step = calls[id(args[0])] = calls.get(id(args[0]), -1) + 1
        value, grads = real(*args)
        return (value * float("nan"), grads) if step >= first_bad else (value, grads)

    monkeypatch.setattr(auditrl.auditworld.training, "policy_gradient", gradient)


def test_auditworld_training_stops_at_the_first_nan_step(monkeypatch: pytest.MonkeyPatch) -> None:
    _nan_from_step(monkeypatch, 2)
    world = World.build(load_behaviors(), 2, 0.75, 0, 3)
    cfg = TrainConfig(
        design="binary", families=["steady"], max_steps=6, groups_per_step=4, group_size=2, max_turns=4, hidden=8,
        init=RandomInit(kind="random"),  # which base the steps start from does not matter here; cloning one cost 2 s
    )  # fmt: skip
    with pytest.raises(NonFiniteTrainingError, match="step 2: the loss is nan"):
        train(world, cfg)


def test_a_diverged_auditworld_job_exits_1_in_one_line_and_writes_no_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _nan_from_step(monkeypatch, 3)
    result = CliRunner().invoke(app, ["train", "--config", str(TINY), "--out", str(tmp_path / "run")])
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "training diverged at step 3" in lines[0] and "Traceback" not in result.output
    assert not (tmp_path / "run" / "results.json").exists()


def test_the_lm_trainer_callback_stops_on_a_nan_loss_or_weight() -> None:
    callback, args, state, control = (
        StopOnNonFinite(),
        TrainingArguments(output_dir="unused", report_to=[]),
        TrainerState(),
        TrainerControl(),
    )
    state.global_step = 4
    model = torch.nn.Linear(2, 2)
    callback.on_log(args, state, control, logs={"loss": 0.5})
    callback.on_step_end(args, state, control, model=model)
    with pytest.raises(NonFiniteTrainingError, match="step 4: the loss is inf"):
        callback.on_log(args, state, control, logs={"loss": float("inf")})
    with torch.no_grad():
        model.weight[0, 0] = float("nan")
    with pytest.raises(NonFiniteTrainingError, match="step 4: weight 'weight'"):
        callback.on_step_end(args, state, control, model=model)
    model.weight.requires_grad_(False)  # frozen weights are not the trainer's to check
    callback.on_step_end(args, state, control, model=model)
