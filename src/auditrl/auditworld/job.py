"""The AuditWorld main job: train auditors under each reward design, evaluate, analyse, report.

`run_from_config` reads a `kind: auditworld` YAML, trains one MLP auditor per (design, seed), evaluates
every trained auditor, the untrained policy and the scripted baselines (random, blind, experimenter,
interrogator) on the held-out behaviors (planted and benign),
clusters the strategies of rendered transcripts, and writes results.json, a transcript sample and a
self-contained HTML report into the run directory. Nothing about the outcome is fixed in advance: the
table and the report state whatever training produced.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from auditrl.analysis.convergence import convergence_table, strategy_convergence
from auditrl.analysis.strategies import cluster_strategies
from auditrl.analysis.summaries import strategy_summaries
from auditrl.atomic import atomic_write_text
from auditrl.auditworld.checkpoints import load_result, result_path, save_result
from auditrl.auditworld.config import load_config
from auditrl.auditworld.report import (
    INTERVALS,
    STATEMENT,
    PolicyEvaluation,
    dimensions_table,
    report_sections,
    results_table,
    seeds_table,
    signatures_table,
)
from auditrl.behaviors.library import load_behaviors
from auditrl.report.html import write_report
from auditrl.report.sections import transcripts_section
from auditrl.scaffold.store import TRANSCRIPTS, write_transcripts
from auditrl.scaffold.transcript import Transcript
from auditrl.sim.metrics import EvalEpisodes, across_seeds, constant_metric_notes, evaluate_policy, pool
from auditrl.sim.policies import MLPPolicy, baselines
from auditrl.sim.render import render_episodes
from auditrl.sim.training import StepStats, TrainResult, train
from auditrl.sim.simulate import Rollout
from auditrl.sim.world import Policy, World

UNTRAINED = "untrained"


def _sample(world: World, rollout: Rollout, n: int, policy: str, tag: str) -> list[Transcript]:
    return render_episodes(world, rollout, np.arange(min(n, rollout.batch.size)), policy, tag)




def run_from_config(config_path: Path, out_dir: Path | None = None) -> Path:
    """Run the whole AuditWorld job; returns the run directory."""
    t0 = time.perf_counter()
    cfg = load_config(Path(config_path))
    run_dir = Path(out_dir) if out_dir is not None else cfg.out_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    console = Console()
    if not console.is_terminal:
        console = Console(width=150)
    world = World.build(
        load_behaviors(), cfg.world.seeds_per_behavior, cfg.world.fair_chance, cfg.world.seed, cfg.world.scenario_topics
    )
    for fam in [*cfg.train_families, cfg.evaluation.family]:
        world.families.index(fam)
    console.print(
        f"[bold]AuditWorld[/bold]: {len(world.behaviors.ids)} behaviors "
        f"({int(world.behaviors.heldout.sum())} held out), {world.n_topics} topics, "
        f"train families {', '.join(cfg.train_families)}, evaluation family {cfg.evaluation.family}"
    )

    trained: dict[str, list[TrainResult]] = {d.name: [] for d in cfg.designs}
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(), console=console,
    ) as progress:  # fmt: skip
        for d in cfg.designs:
            for seed in cfg.seeds:
                task = progress.add_task(f"train {d.name} seed {seed}", total=cfg.train.steps, info="")

                def on_step(s: StepStats, task: Any = task) -> None:
                    progress.update(task, advance=1, info=f"reward {s.reward:.3f}")

                checkpoint = result_path(run_dir, d.name, seed)
                result = load_result(checkpoint, cfg.train_config(d, seed))
                if result is None:
                    result = train(world, cfg.train_config(d, seed), cfg.judge, on_step)
                    save_result(checkpoint, result)
                else:
                    progress.update(task, completed=cfg.train.steps, info="resumed from its checkpoint")
                trained[d.name].append(result)
    train_seconds = sum(r.seconds for rs in trained.values() for r in rs)
    train_episodes = sum(r.episodes for rs in trained.values() for r in rs)

    rows: dict[str, PolicyEvaluation] = {}
    samples: list[Transcript] = []
    saved: list[Transcript] = []
    groups: list[str] = []
    sample_seeds: list[int] = []
    n_sample = cfg.analysis.transcripts_per_policy
    untrained = [
        (seed, MLPPolicy(hidden=cfg.train.hidden, seed=seed, name=UNTRAINED, prior_no_finding=cfg.train.prior_no_finding))
        for seed in cfg.seeds
    ]
    policies: list[tuple[str, list[tuple[int, Policy]]]] = [
        (p.name, [(seed, p) for seed in cfg.seeds]) for p in baselines(cfg.world.blind_claim_rate)
    ] + [(UNTRAINED, untrained)] + [(name, [(r.config.seed, r.policy) for r in rs]) for name, rs in trained.items()]  # type: ignore[misc]
    with console.status("evaluating on held-out behaviors"):
        for name, seeded in policies:
            parts: list[EvalEpisodes] = []
            for seed, policy in seeded:
                values, planted, benign = evaluate_policy(world, policy, cfg.evaluation, np.random.default_rng(10_000 + seed), cfg.judge)
                parts.append(values)
                tag = f"s{seed}"
                batch = _sample(world, planted, n_sample, name, f"{tag}-planted") + _sample(
                    world, benign, n_sample, name, f"{tag}-benign"
                )
                samples += batch
                saved += batch[: cfg.analysis.transcripts_saved] + batch[n_sample : n_sample + cfg.analysis.transcripts_saved]
                groups += [name] * len(batch)
                sample_seeds += [seed] * len(batch)
            pooled = pool(parts)
            rows[name] = PolicyEvaluation(
                suite=pooled.suite_result(name),
                diagnostics=pooled.diagnostics(),
                seeds=across_seeds(parts, [seed for seed, _ in seeded]),
                constant=constant_metric_notes(pooled),
                dimensions=pooled.dimensions(),
            )
    console.print(results_table(rows))
    console.print(signatures_table(rows))
    console.print(dimensions_table(rows))
    console.print(seeds_table(rows, len(cfg.seeds)))

    with console.status("clustering strategies"):
        clusters = cluster_strategies(
            strategy_summaries(samples), k=cfg.analysis.clusters, seed=cfg.seeds[0], embedder=cfg.analysis.embedder
        )
    category_dist = clusters.distribution(groups, level="category")
    console.print(clusters.distribution_table(groups, level="category"))
    best = max(trained, key=lambda name: rows[name].suite.estimates()["composite"].mean)
    runs = [(d.name, d.design, d.benign_fraction) for d in cfg.designs]
    convergence = strategy_convergence(clusters, groups, runs, best, sample_seeds)
    console.print(convergence_table(convergence, clusters).to_rich())

    write_transcripts(run_dir / TRANSCRIPTS, saved)
    elapsed = time.perf_counter() - t0
    results = {
        "kind": "auditworld",
        "config": json.loads(cfg.model_dump_json()),
        "behaviors": {"train": [world.behaviors.ids[i] for i in world.behavior_indices("train")],
                      "heldout": [world.behaviors.ids[i] for i in world.behavior_indices("heldout")]},
        "results": {
            name: {"estimates": {m: e.model_dump() for m, e in row.suite.estimates().items()},
                   "across_training_seeds": {m: s.model_dump() for m, s in row.seeds.items()},
                   "constant_metrics": row.constant,
                   "audit_quality_dimensions": row.dimensions,
                   "diagnostics": row.diagnostics}
            for name, row in rows.items()
        },
        "intervals": INTERVALS,
        "training": {
            name: [{"seed": r.config.seed, "seconds": r.seconds, "episodes": r.episodes,
                    "history": [_finite(asdict(s)) for s in r.history]} for r in rs]
            for name, rs in trained.items()
        },
        "throughput_episodes_per_second": train_episodes / train_seconds if train_seconds > 0 else None,
        "strategies": {"classifier": clusters.classifier, "category_shares": category_dist,
                       "archetypes": {t.id: a for t, a in zip(samples, clusters.archetypes, strict=True)},
                       "convergence": [r.model_dump() for r in convergence],
                       "clusters": [c.model_dump() for c in clusters.clusters]},
        "runtime_seconds": elapsed,
        "statement": STATEMENT,
    }  # fmt: skip
    atomic_write_text(run_dir / "results.json", json.dumps(results, indent=2, allow_nan=False, default=_json_default))
    report = write_report(run_dir / "report.html", f"AuditWorld: {cfg.name}", [*report_sections(cfg, rows, trained, clusters, groups, results, convergence), transcripts_section(saved, limit=2 * len(policies))])
    console.print(
        f"trained {train_episodes:,} episodes in {train_seconds:.1f} s "
        f"({results['throughput_episodes_per_second']:,.0f} episodes/s); total {elapsed:.1f} s"
    )
    console.print(f"report: {report}")
    return run_dir


def _finite(row: dict[str, Any]) -> dict[str, Any]:
    """NaN (a statistic with no data, e.g. the FP rate of a batch without benign groups) becomes null."""
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")

