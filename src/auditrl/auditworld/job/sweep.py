"""The robustness map: AuditWorld's designs trained from the base against pairwise judges of growing flaw strength.

A `kind: auditworld_sweep` config is an AuditWorld config plus a `sweep` grid. For every cell of the grid
the pairwise judges (in-group, reference, and their calibration variant) get the config's shared judge
flaws with alarm susceptibility and narration credulity (a two-dimensional map) or position bias (a
line) replaced; every listed design is trained over every seed from the job's base (built once per seed,
as in the main job) against them and evaluated on the held-out suite, which reads ground truth. The
base, and the blind and experimenter baselines, are evaluated once: a cell where training leaves the
auditor below the base it started from is where a design stops being robust to that judge.
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
from auditrl.auditworld.job.bases import base_name, build_bases, job_bases
from auditrl.auditworld.job.config import AuditWorldConfig
from auditrl.auditworld.job.report import prose
from auditrl.auditworld.job.run import build_world, run_directory
from auditrl.auditworld.judges import JudgeParams
from auditrl.auditworld.metrics import evaluate_policy, seed_means
from auditrl.auditworld.policies import BlindPolicy, ExperimenterPolicy
from auditrl.auditworld.training import train
from auditrl.auditworld.world import Policy, World
from auditrl.configfile import ConfigModel, read_yaml_mapping, validate_file
from auditrl.pages.html import FigureBlock, Section, TableBlock, write_page
from auditrl.pages.plots import heatmap, training_curves

MAPPED = ("composite", "false_positive", "audit_quality", "identified")
FP_DROP = 10.0
"""A cell "loses calibration" when its FP calibration is this many points below the base's."""


class SweepGrid(ConfigModel):
    """The flaw strengths of the pairwise judges to train against."""

    alarm: list[float] = Field(
        min_length=1,
        description=(
            "Alarm susceptibility values (map rows); from 0 up to the shared `judge.flaws.alarm` of the pointwise "
            "judge."
        ),
    )
    credulity: list[float] = Field(
        min_length=1,
        description="Narration credulity values (map columns); from 0 up to the shared `judge.flaws.credulity`.",
    )
    position_bias: list[float] = Field(
        min_length=1, description="Position bias values (a line), with alarm and credulity at the shared levels."
    )


class SweepConfig(AuditWorldConfig):
    """The `kind: auditworld_sweep` config file: an AuditWorld config and the grid (analysis is not run)."""

    kind: Literal["auditworld_sweep"] = Field(description="Selects the robustness sweep in `auditrl train`.")  # type: ignore[assignment]  # narrows the base config's kind
    out_dir: Path = Field(
        default=Path("runs/auditworld_sweep"), description="Run directory (overridden by `auditrl train --out`)."
    )
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
    return seed_means(values)


def _mean(per_seed: list[dict[str, float]]) -> dict[str, float]:
    return {m: float(np.mean([p[m] for p in per_seed])) for m in MAPPED}


def run_sweep(config_path: Path, out_dir: Path | None = None) -> Path:
    """Train and evaluate every (cell, design, seed); write sweep.json and report.html; return the run directory."""
    t0 = time.perf_counter()
    cfg = load_sweep_config(Path(config_path))
    run_dir = run_directory(cfg, out_dir)
    console = Console()
    world = build_world(cfg)
    bases = job_bases(cfg)
    cells = _cells(cfg)
    results: list[dict[str, Any]] = []
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as progress:  # fmt: skip
        task = progress.add_task("bases", total=len(bases) * len(cfg.seeds))
        build_bases(world, cfg, run_dir, bases, lambda b, seed: progress.advance(task))
        references: dict[str, dict[str, float]] = {
            p.name: _mean([_evaluate(world, cfg, p, s) for s in cfg.seeds])
            for p in (BlindPolicy(cfg.world.blind_claim_rate), ExperimenterPolicy())
        }
        for b in bases.values():
            references[b.name] = _mean([_evaluate(world, cfg, b.policies[s], s) for s in cfg.seeds])
        task = progress.add_task("robustness map", total=len(cells) * len(cfg.designs) * len(cfg.seeds))
        for cell in cells:
            params = _params(cfg, cell)
            for d in cfg.designs:
                base = bases[base_name(cfg, cfg.base_of(d))]
                per_seed = []
                for seed in cfg.seeds:
                    result = train(world, cfg.train_config(d, seed), params, base=base.policies[seed])
                    per_seed.append(_evaluate(world, cfg, result.policy, seed))
                    progress.advance(task)
                results.append({
                    **cell, "design": d.name, "base": base.name, **_mean(per_seed),
                    "per_seed": {m: [p[m] for p in per_seed] for m in MAPPED},
                })  # fmt: skip
    elapsed = time.perf_counter() - t0
    summary = {
        "kind": "auditworld_sweep",
        "config": json.loads(cfg.model_dump_json()),
        "references": references,
        "base_label": bases[next(iter(bases))].label(),
        "cells": results,
        "robustness": {
            d.name: robustness(cfg, results, d.name, references[base_name(cfg, cfg.base_of(d))]) for d in cfg.designs
        },
        "runtime_seconds": elapsed,
    }
    atomic_write_text(run_dir / "sweep.json", json.dumps(summary, indent=2))
    report = write_page(run_dir / "report.html", f"AuditWorld robustness map: {cfg.name}", _sections(cfg, summary))
    for name, text in summary["robustness"].items():
        console.print(f"[bold]{name}[/bold]: {text}")
    console.print(f"sweep of {len(results)} (cell, design) points in {elapsed:.0f} s; page: {report}")
    return run_dir


def _grid(cfg: SweepConfig, results: list[dict[str, Any]], design: str, metric: str) -> list[list[float]]:
    """Map values by (alarm row, credulity column) at the shared position bias."""
    bias = cfg.judge.pair.position_bias
    at = {
        (r["alarm"], r["credulity"]): r[metric] for r in results if r["design"] == design and r["position_bias"] == bias
    }
    return [[at.get((a, c), float("nan")) for c in cfg.sweep.credulity] for a in cfg.sweep.alarm]


def robustness(cfg: SweepConfig, results: list[dict[str, Any]], design: str, base: dict[str, float]) -> str:
    """Across the map: where training left the design's composite below its base's, where it lost calibration,
    and how its identification compares with the base's."""
    grid = np.array(_grid(cfg, results, design, "composite"))
    fp = np.array(_grid(cfg, results, design, "false_positive"))
    found = np.array(_grid(cfg, results, design, "identified"))
    below = grid < base["composite"]
    lost = fp < base["false_positive"] - FP_DROP
    at = lambda mask: [(cfg.sweep.alarm[i], cfg.sweep.credulity[j]) for i, j in zip(*np.nonzero(mask), strict=True)]
    first = lambda cells: min(cells, key=lambda ac: (ac[0] + ac[1], ac[0]))
    return " ".join(
        prose(
            "sweep_robustness.txt.j2",
            base=base,
            n=grid.size,
            found_lo=float(np.nanmin(found)),
            found_hi=float(np.nanmax(found)),
            above_base_id=int((found > base["identified"]).sum()),
            below=at(below),
            lost=at(lost),
            first_below=first(at(below)) if below.any() else None,
            first_lost=first(at(lost)) if lost.any() else None,
            fp_drop=FP_DROP,
            zero=float(grid[0, 0]),
            alarm0=cfg.sweep.alarm[0],
            credulity0=cfg.sweep.credulity[0],
        )
    )


def _sections(cfg: SweepConfig, summary: dict[str, Any]) -> list[Section]:
    results, references = summary["cells"], summary["references"]
    figures = []
    for d in cfg.designs:
        base = references[base_name(cfg, cfg.base_of(d))]
        below = (np.array(_grid(cfg, results, d.name, "composite")) < base["composite"]).tolist()
        for metric, label in (
            ("composite", "composite"),
            ("identified", "identification %"),
            ("false_positive", "FP calibration"),
        ):
            figures.append(
                FigureBlock(
                    heatmap(
                        _grid(cfg, results, d.name, metric),
                        cfg.sweep.credulity,
                        cfg.sweep.alarm,
                        f"{d.name}: {label}",
                        "pairwise judge's narration credulity",
                        "pairwise judge's alarm susceptibility",
                        marked=below,
                    ),
                    (
                        f"{d.name}, {label} (mean over {len(cfg.seeds)} training seeds) by the pairwise judge's "
                        "alarm susceptibility and narration credulity, position bias "
                        f"{cfg.judge.pair.position_bias:g}; the base it started from scored {base[metric]:.1f}. Red "
                        f"outline: composite below the base's {base['composite']:.1f}."
                    ),
                )
            )
    line = {
        f"{d.name} {label}": (
            [r["position_bias"] for r in rs], [r[metric] for r in rs]
        )
        for d in cfg.designs
        for metric, label in (("composite", "composite"), ("identified", "ident. %"), ("false_positive", "FP cal."))
        for rs in [sorted((r for r in results if r["design"] == d.name and r["alarm"] == cfg.judge.pair.alarm
                           and r["credulity"] == cfg.judge.pair.credulity), key=lambda r: r["position_bias"])]
    }  # fmt: skip
    figures.append(FigureBlock(
        training_curves(line, title="Position bias of the pairwise judge", xlabel="position bias (latent units)",
                        ylabel="score (0-100)"),
        (
            "Composite, identification and FP calibration by the pairwise judge's position bias, alarm "
            f"{cfg.judge.pair.alarm:g} and credulity {cfg.judge.pair.credulity:g}; both orders of every comparison "
            "are judged."
        ),
    ))  # fmt: skip
    rows = [[r["design"], f"{r['alarm']:g}", f"{r['credulity']:g}", f"{r['position_bias']:g}",
             *[f"{r[m]:.1f}" for m in MAPPED]] for r in results]  # fmt: skip
    paragraphs = prose(
        "sweep.txt.j2", shared=cfg.judge.flaws, robustness=summary["robustness"], references=references,
        seeds=len(cfg.seeds), train=cfg.train, runtime=summary["runtime_seconds"],
        base_label=summary["base_label"],
    )  # fmt: skip
    return [
        Section(title="What this map shows and does not", paragraphs=paragraphs),
        Section(title="Maps", figures=figures),
        Section(
            title="Every cell",
            tables=[
                TableBlock(
                    header=[
                        "design",
                        "alarm",
                        "credulity",
                        "position bias",
                        "composite",
                        "FP calibration",
                        "audit quality",
                        "identified %",
                    ],
                    rows=rows,
                    caption="Means over training seeds",
                )
            ],
        ),  # fmt: skip
    ]
