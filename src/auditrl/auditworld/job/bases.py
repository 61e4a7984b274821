"""The bases of an AuditWorld job: each distinct `init` of its designs, built once per training seed and cached.

A base is the "base model" row of every table: the trained designs are read against the base they
started from. For an imitation base the job also measures how often it follows its expert (its
competence, as reached), which the report states beside the configured values.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditrl.auditworld.base import BaseInit, CheckpointInit, ImitationInit, build_base, measure_agreement
from auditrl.auditworld.job.checkpoints import base_path, load_base, save_base
from auditrl.auditworld.job.config import AuditWorldConfig
from auditrl.auditworld.policies import MLPPolicy
from auditrl.auditworld.world import World

BASE = "base"
"""The row name of the job's own base (`train.init`); other bases are named by their kind."""


@dataclass
class Base:
    """One base config of the job: its row name, config, and per training seed its policy and measured facts."""

    name: str
    init: BaseInit
    policies: dict[int, MLPPolicy] = field(default_factory=dict)
    facts: dict[int, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0

    def label(self) -> str:
        return self.init.label()


def base_name(cfg: AuditWorldConfig, init: BaseInit) -> str:
    return BASE if init == cfg.train.init else f"{BASE}, {init.kind} init"


def _key(cfg: AuditWorldConfig, init: BaseInit) -> dict[str, Any]:
    """Everything a base depends on: its config, the policy width, the training families and the world."""
    key: dict[str, Any] = {
        "init": init.model_dump(mode="json"),
        "hidden": cfg.train.hidden,
        "families": cfg.train_families,
        "world": cfg.world.model_dump(mode="json"),
    }
    if isinstance(init, CheckpointInit) and init.path.is_file():
        key["file_sha256"] = hashlib.sha256(init.path.read_bytes()).hexdigest()
    return key


def job_bases(cfg: AuditWorldConfig) -> dict[str, Base]:
    """The distinct bases of the job's designs by row name, the job's own base first."""
    out: dict[str, Base] = {BASE: Base(BASE, cfg.train.init)}
    for d in cfg.designs:
        init = cfg.base_of(d)
        out.setdefault(base_name(cfg, init), Base(base_name(cfg, init), init))
    return out


def build_bases(
    world: World,
    cfg: AuditWorldConfig,
    run_dir: Path,
    bases: dict[str, Base],
    on_built: Callable[[Base, int], None] | None = None,
) -> None:
    """Load or build every base for every seed (cached in the run directory's checkpoints)."""
    fams = [world.families.index(f) for f in cfg.train_families]
    for b in bases.values():
        key = _key(cfg, b.init)
        for seed in cfg.seeds:
            path = base_path(run_dir, key, seed)
            cached = load_base(path, key)
            if cached is None:
                start = time.process_time()
                policy = build_base(world, b.init, cfg.train.hidden, seed, fams)
                facts: dict[str, Any] = {}
                if isinstance(b.init, ImitationInit):
                    facts["agreement"] = measure_agreement(world, policy, b.init, fams, seed + 1).model_dump()
                facts["cpu_seconds"] = time.process_time() - start
                save_base(path, key, policy, facts)
                cached = (policy, facts)
            b.policies[seed], b.facts[seed] = cached
            b.seconds += float(cached[1].get("cpu_seconds", 0.0))
            if on_built is not None:
                on_built(b, seed)
