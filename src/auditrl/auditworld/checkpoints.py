"""Finished AuditWorld training runs on disk, so that a killed job resumes instead of starting over.

Each (design, seed) training run is written atomically the moment it ends. A job started again on the
same run directory loads every run it finds whose config is unchanged and trains only the others;
training is deterministic for a given config, so the resumed job ends with the same results as an
uninterrupted one. A run killed midway is trained again from its first step. Weights are stored as
JSON numbers, which hold float32 values exactly.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import torch

from auditrl.atomic import atomic_write_text
from auditrl.sim.policies import MLPPolicy
from auditrl.sim.training import StepStats, TrainConfig, TrainResult

CHECKPOINTS = "checkpoints"
"""The folder of a run directory that holds the finished training runs."""


def result_path(run_dir: Path, name: str, seed: int) -> Path:
    return run_dir / CHECKPOINTS / f"{name}-seed{seed}.json"


def save_result(path: Path, result: TrainResult) -> None:
    """Write a finished run: its config, the policy's weights, its step history, episodes and time."""
    payload = {
        "config": result.config.model_dump(mode="json"),
        "weights": {name: tensor.tolist() for name, tensor in result.policy.state_dict().items()},
        "history": [asdict(s) for s in result.history],
        "episodes": result.episodes,
        "seconds": result.seconds,
    }
    atomic_write_text(path, json.dumps(payload))


def load_result(path: Path, cfg: TrainConfig) -> TrainResult | None:
    """The finished run stored at `path` if it was trained with `cfg`, else None (train it again)."""
    if not path.is_file():
        return None
    payload = json.loads(path.read_text(encoding="utf-8"))
    if payload["config"] != cfg.model_dump(mode="json"):
        return None
    policy = MLPPolicy(hidden=cfg.hidden, seed=cfg.seed, name=cfg.design, prior_no_finding=cfg.prior_no_finding)
    policy.load_state_dict({name: torch.tensor(values, dtype=torch.float32) for name, values in payload["weights"].items()})
    history = [StepStats(**s) for s in payload["history"]]
    return TrainResult(policy=policy, config=cfg, history=history, episodes=payload["episodes"], seconds=payload["seconds"])
