"""Finished AuditWorld bases and training runs on disk, so that a killed job resumes instead of starting over.

Each base (one per base config and seed) and each (design, seed) training run is written atomically the
moment it is done. A job started again on the same run directory loads every one it finds whose config
is unchanged and builds or trains only the others; both are deterministic for a given config, so the
resumed job ends with the same results as an uninterrupted one. A run killed midway is trained again
from its first step. Weights are stored as JSON numbers, which hold float32 values exactly, under
`weights`: any of these files can be a `checkpoint` base of another job. A stored file that cannot be read
or used (empty, corrupted, of another shape) is set aside, named in a warning, and built again.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

from auditrl.atomic import atomic_write_text
from auditrl.auditworld.policies import MLPPolicy
from auditrl.auditworld.training import StepStats, TrainConfig, TrainResult
from auditrl.reading import CHECKPOINT, FileReadError, read_json

CHECKPOINTS = "checkpoints"
"""The folder of a run directory that holds the finished bases and training runs."""


def result_path(run_dir: Path, name: str, seed: int) -> Path:
    return run_dir / CHECKPOINTS / f"{name}-seed{seed}.json"


def base_path(run_dir: Path, key: dict[str, Any], seed: int) -> Path:
    """One file per base config (by a digest of everything the base depends on) and seed."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:12]
    return run_dir / CHECKPOINTS / f"base-{key['init']['kind']}-{digest}-seed{seed}.json"


def save_base(path: Path, key: dict[str, Any], policy: MLPPolicy, facts: dict[str, Any]) -> None:
    """Write a base: what it was built from, its weights, and what was measured of it (its agreement)."""
    atomic_write_text(path, json.dumps({"config": key, "weights": policy.weights(), "facts": facts}))


class RebuiltWarning(UserWarning):
    """A stored base or training run could not be read; it is built (or trained) again."""


def _stored(path: Path) -> dict[str, Any] | None:
    """The payload stored at `path` (None when there is none), read bounded (auditrl.reading); one that cannot be
    read is reported with a RebuiltWarning naming the file and set aside as `<name>.unreadable` (kept, never
    deleted), so what replaces it is written beside it."""
    if not path.is_file():
        return None
    try:
        payload = read_json(path, CHECKPOINT, allow_inf_nan=True)  # a step's statistics may be NaN
        if not isinstance(payload, dict) or not isinstance(payload.get("config"), dict):
            raise FileReadError(f"{path}: not a stored run (no 'config' mapping)")
    except FileReadError as exc:
        kept = path.with_name(path.name + ".unreadable")
        path.replace(kept)
        note = f"{exc}; building it again (the unreadable file is kept as {kept.name})"
        warnings.warn(note, RebuiltWarning, stacklevel=3)
        return None
    return payload


def _unusable(path: Path, exc: Exception) -> None:
    kept = path.with_name(path.name + ".unreadable")
    path.replace(kept)
    detail = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:300]
    warnings.warn(
        f"{path}: not a stored run this job can use ({detail}); building it again (kept as {kept.name})",
        RebuiltWarning,
        stacklevel=3,
    )


def load_base(path: Path, key: dict[str, Any]) -> tuple[MLPPolicy, dict[str, Any]] | None:
    """The base stored at `path` if it was built from `key`, else None (build it again, after a warning when the
    file was there but could not be read)."""
    payload = _stored(path)
    if payload is None or payload["config"] != key:
        return None
    try:
        return MLPPolicy.from_weights(payload["weights"], "base"), dict(payload["facts"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        _unusable(path, exc)
        return None


def save_result(path: Path, result: TrainResult) -> None:
    """Write a finished run: its config, the policy's weights, its step history, episodes and time."""
    payload = {
        "config": result.config.model_dump(mode="json"),
        "weights": result.policy.weights(),
        "history": [asdict(s) for s in result.history],
        "episodes": result.episodes,
        "seconds": result.seconds,
        "cpu_seconds": result.cpu_seconds,
    }
    atomic_write_text(path, json.dumps(payload))


def load_result(path: Path, cfg: TrainConfig) -> TrainResult | None:
    """The finished run stored at `path` if it was trained with `cfg`, else None (train it again)."""
    payload = _stored(path)
    if payload is None or payload["config"] != cfg.model_dump(mode="json"):
        return None
    try:
        policy = MLPPolicy.from_weights(payload["weights"], cfg.design)
        history = [StepStats(**s) for s in payload["history"]]
        return TrainResult(
            policy=policy,
            config=cfg,
            history=history,
            episodes=payload["episodes"],
            seconds=payload["seconds"],
            cpu_seconds=payload["cpu_seconds"],
        )
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        _unusable(path, exc)
        return None
