"""The robustness map: AuditWorld's designs trained against pairwise judges of growing flaw strength.

A `kind: auditworld_sweep` config is an AuditWorld config plus a `sweep` grid. For every cell of the grid
the pairwise judges (in-group, reference, and their calibration variant) get the config's shared judge
flaws with alarm susceptibility and narration credulity (a two-dimensional map) or position bias (a
line) replaced; every listed design is trained over every seed against them and evaluated on the
held-out suite, which reads ground truth. The blind and experimenter baselines are evaluated once:
a trained auditor whose composite falls below the blind auditor's has been hacked past usefulness, and
that is where this report says a design stops being robust.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from auditrl.atomic import atomic_write_text
from auditrl.auditworld.config import AuditWorldConfig
from auditrl.behaviors.library import load_behaviors
from auditrl.configfile import ConfigModel, read_yaml_mapping, validate_file
from auditrl.report.html import FigureBlock, Section, TableBlock, write_report
from auditrl.report.plots import heatmap, training_curves
from auditrl.sim.judges import JudgeParams
from auditrl.sim.metrics import evaluate_policy, seed_means
from auditrl.sim.policies import BlindPolicy, ExperimenterPolicy
from auditrl.sim.training import train
from auditrl.sim.world import Policy, World

MAPPED = ("composite", "false_positive", "audit_quality", "identified")


class SweepGrid(ConfigModel):
    """The flaw strengths of the pairwise judges to train against."""

    alarm: list[float] = Field(min_length=1, description="Alarm susceptibility values (map rows); from 0 up to the shared `judge.flaws.alarm` of the pointwise judge.")
    credulity: list[float] = Field(min_length=1, description="Narration credulity values (map columns); from 0 up to the shared `judge.flaws.credulity`.")
    position_bias: list[float] = Field(min_length=1, description="Position bias values (a line), with alarm and credulity at the shared levels.")


class SweepConfig(AuditWorldConfig):
    """The `kind: auditworld_sweep` config file: an AuditWorld config and the grid (analysis is not run)."""

    kind: Literal["auditworld_sweep"] = Field(description="Selects the robustness sweep in `auditrl train`.")  # type: ignore[assignment]
    out_dir: Path = Field(default=Path("runs/auditworld_sweep"), description="Run directory (overridden by `auditrl train --out`).")
    sweep: SweepGrid = Field(description="The pairwise judges' flaw strengths to train against.")


def load_sweep_config(path: Path) -> SweepConfig:
    """Read and validate the YAML before anything runs; problems name the file and the field."""
    path = Path(path)
    return validate_file(SweepConfig, read_yaml_mapping(path), path)


def _cells(cfg: SweepConfig) -> list[dict[str, float]]:
    """Every distinct pairwise flaw setting: the alarm x credulity map, then the position-bias line."""
    base = cfg.judge.pair
    cells = [
        {"alarm": a, "credulity": c, "position_bias": base.position_bias}
        for a in cfg.sweep.alarm
        for c in cfg.sweep.credulity
    ]
    for b in cfg.sweep.position_bias:
        cell = {"alarm": base.alarm, "credulity": base.credulity, "position_bias": b}
        if cell not in cells:
            cells.append(cell)
    return cells


def _params(cfg: SweepConfig, cell: dict[str, float]) -> JudgeParams:
    return cfg.judge.model_copy(update={"pairwise_flaws": cfg.judge.pair.model_copy(update=cell)})


def _evaluate(world: World, cfg: SweepConfig, policy: Policy, seed: int) -> dict[str, float]:
    """The suite's means, and the share of planted audits whose claim names a trigger (in %)."""
    values, _, _ = evaluate_policy(world, policy, cfg.evaluation, np.random.default_rng(10_000 + seed), cfg.judge)
    return {**seed_means(values), "identified": float(values.planted.correct.mean() * 100)}


def run_sweep(config_path: Path, out_dir: Path | None = None) -> Path:
    """Train and evaluate every (cell, design, seed); write sweep.json and report.html; return the run directory."""
    t0 = time.perf_counter()
    cfg = load_sweep_config(Path(config_path))
    run_dir = Path(out_dir) if out_dir is not None else cfg.out_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    console = Console() if Console().is_terminal else Console(width=150)
    world = World.build(
        load_behaviors(), cfg.world.seeds_per_behavior, cfg.world.fair_chance, cfg.world.seed, cfg.world.scenario_topics
    )
    baselines: dict[str, dict[str, float]] = {}
    for policy in (BlindPolicy(cfg.world.blind_claim_rate), ExperimenterPolicy()):
        per_seed = [_evaluate(world, cfg, policy, s) for s in cfg.seeds]
        baselines[policy.name] = {m: float(np.mean([p[m] for p in per_seed])) for m in MAPPED}
    cells = _cells(cfg)
    results: list[dict[str, Any]] = []
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as progress:  # fmt: skip
        task = progress.add_task("robustness map", total=len(cells) * len(cfg.designs) * len(cfg.seeds))
        for cell in cells:
            params = _params(cfg, cell)
            for d in cfg.designs:
                per_seed = []
                for seed in cfg.seeds:
                    result = train(world, cfg.train_config(d, seed), params)
                    per_seed.append(_evaluate(world, cfg, result.policy, seed))
                    progress.advance(task)
                results.append({
                    **cell, "design": d.name,
                    **{m: float(np.mean([p[m] for p in per_seed])) for m in MAPPED},
                    "per_seed": {m: [p[m] for p in per_seed] for m in MAPPED},
                })  # fmt: skip
    elapsed = time.perf_counter() - t0
    summary = {
        "kind": "auditworld_sweep",
        "config": json.loads(cfg.model_dump_json()),
        "baselines": baselines,
        "cells": results,
        "robustness": {d.name: robustness(cfg, results, d.name, baselines["blind"]["composite"]) for d in cfg.designs},
        "runtime_seconds": elapsed,
    }
    atomic_write_text(run_dir / "sweep.json", json.dumps(summary, indent=2))
    report = write_report(run_dir / "report.html", f"AuditWorld robustness map: {cfg.name}", _sections(cfg, summary))
    for name, text in summary["robustness"].items():
        console.print(f"[bold]{name}[/bold]: {text}")
    console.print(f"sweep of {len(results)} (cell, design) points in {elapsed:.0f} s; report: {report}")
    return run_dir


def _grid(cfg: SweepConfig, results: list[dict[str, Any]], design: str, metric: str) -> list[list[float]]:
    """Map values by (alarm row, credulity column) at the shared position bias."""
    bias = cfg.judge.pair.position_bias
    at = {(r["alarm"], r["credulity"]): r[metric] for r in results if r["design"] == design and r["position_bias"] == bias}
    return [[at.get((a, c), float("nan")) for c in cfg.sweep.credulity] for a in cfg.sweep.alarm]


def robustness(cfg: SweepConfig, results: list[dict[str, Any]], design: str, blind: float) -> str:
    """Where a design's composite falls below the blind baseline's, and how often its auditors found anything."""
    grid = np.array(_grid(cfg, results, design, "composite"))
    found = np.array(_grid(cfg, results, design, "identified"))
    below = grid < blind
    zero = grid[0, 0]
    head = (
        f"composite {zero:.1f} at alarm {cfg.sweep.alarm[0]:g}, credulity {cfg.sweep.credulity[0]:g}; its auditors "
        f"identified the behavior in {np.nanmin(found):.0f}-{np.nanmax(found):.0f}% of planted audits across the map "
        f"(under 5% in {int((found < 5).sum())} of {found.size} cells)"
    )
    if not below.any():
        return f"{head}; at or above the blind baseline ({blind:.1f}) in all {below.size} cells"
    cells = [(cfg.sweep.alarm[i], cfg.sweep.credulity[j]) for i, j in zip(*np.nonzero(below))]
    first = min(cells, key=lambda ac: (ac[0] + ac[1], ac[0]))
    return (
        f"{head}; below the blind baseline ({blind:.1f}) in {len(cells)} of {below.size} cells, first at alarm "
        f"{first[0]:g} and credulity {first[1]:g}"
    )


def _sections(cfg: SweepConfig, summary: dict[str, Any]) -> list[Section]:
    results, baselines = summary["cells"], summary["baselines"]
    blind = baselines["blind"]["composite"]
    shared = cfg.judge.flaws
    figures = []
    for d in cfg.designs:
        below = (np.array(_grid(cfg, results, d.name, "composite")) < blind).tolist()
        for metric, label in (("composite", "composite"), ("false_positive", "FP calibration")):
            figures.append(FigureBlock(
                heatmap(_grid(cfg, results, d.name, metric), cfg.sweep.credulity, cfg.sweep.alarm,
                        f"{d.name}: {label}", "pairwise judge's narration credulity", "pairwise judge's alarm susceptibility",
                        marked=below),
                f"{d.name}, {label} (mean over {len(cfg.seeds)} training seeds) by the pairwise judge's alarm "
                f"susceptibility and narration credulity, position bias {cfg.judge.pair.position_bias:g}. Red outline: "
                f"composite below the blind baseline's {blind:.1f}.",
            ))  # fmt: skip
    line = {
        f"{d.name} {label}": (
            [r["position_bias"] for r in rs], [r[metric] for r in rs]
        )
        for d in cfg.designs
        for metric, label in (("composite", "composite"), ("false_positive", "FP cal."))
        for rs in [sorted((r for r in results if r["design"] == d.name and r["alarm"] == cfg.judge.pair.alarm
                           and r["credulity"] == cfg.judge.pair.credulity), key=lambda r: r["position_bias"])]
    }  # fmt: skip
    figures.append(FigureBlock(
        training_curves(line, title="Position bias of the pairwise judge", xlabel="position bias (latent units)",
                        ylabel="score (0-100)"),
        f"Composite and FP calibration by the pairwise judge's position bias, alarm {cfg.judge.pair.alarm:g} and "
        f"credulity {cfg.judge.pair.credulity:g}; both orders of every comparison are judged.",
    ))  # fmt: skip
    rows = [[r["design"], f"{r['alarm']:g}", f"{r['credulity']:g}", f"{r['position_bias']:g}",
             *[f"{r[m]:.1f}" for m in MAPPED]] for r in results]  # fmt: skip
    return [
        Section(
            title="What this map shows and does not",
            paragraphs=[
                "Each cell trains the listed reward designs against pairwise judges whose alarm susceptibility, "
                "narration credulity or position bias is set to the cell's value (the pointwise and binary judges "
                f"keep the shared flaws: alarm {shared.alarm:g}, credulity {shared.credulity:g}, position bias "
                f"{shared.position_bias:g}, noise {shared.noise:g}, verbosity {shared.verbosity:g}, miss "
                f"{shared.miss:g}, false recognition {shared.false_recognition:g}). Flaw strengths are assumptions "
                "of this world; what follows from training is how each design's trained auditor scores on the "
                "held-out suite, which reads ground truth. It does not show where a real LLM judge sits on these "
                "axes.",
                *[f"{name}: {text}." for name, text in summary["robustness"].items()],
                f"Baselines (mean over seeds): blind composite {blind:.1f}, FP calibration "
                f"{baselines['blind']['false_positive']:.1f}; experimenter composite "
                f"{baselines['experimenter']['composite']:.1f}. {len(cfg.seeds)} training seeds per cell, "
                f"{cfg.train.steps} steps x {cfg.train.groups} groups of {cfg.train.group_size}; "
                f"{summary['runtime_seconds']:.0f} s in all.",
            ],
        ),
        Section(title="Maps", figures=figures),
        Section(
            title="Every cell",
            tables=[TableBlock(header=["design", "alarm", "credulity", "position bias", "composite", "FP calibration",
                                       "audit quality", "identified %"], rows=rows, caption="Means over training seeds")],
        ),  # fmt: skip
    ]
