"""The AuditWorld main job: build the base, train auditors from it under each reward design, evaluate, report.

`run_from_config` reads a `kind: auditworld` YAML, builds each base once per training seed (cached),
trains one MLP auditor per (design, seed) from its base, evaluates every trained auditor, the bases and
the scripted baselines (random, blind, experimenter, interrogator, and the experimenter with its claims
suppressed) on the held-out behaviors (planted and benign), clusters the strategies of rendered
transcripts, and writes results.json, a transcript sample and a self-contained HTML page into the run
directory. Nothing about the outcome is fixed in advance: the tables and the report state whatever
training produced.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from auditrl.analysis.convergence import convergence_table, strategy_convergence
from auditrl.analysis.strategies import cluster_strategies
from auditrl.analysis.summaries import strategy_summaries
from auditrl.auditworld.job.bases import Base, base_name, build_bases, job_bases
from auditrl.auditworld.job.checkpoints import load_result, result_path, save_result
from auditrl.auditworld.job.config import AuditWorldConfig, DesignRun, load_config
from auditrl.auditworld.job.evaluation import Evaluated
from auditrl.auditworld.job.report import INTERVALS, NEVER_CLAIMS, report_sections, terminal_summary, terminal_tables
from auditrl.auditworld.job.results import (
    AuditorResult,
    AuditWorldResults,
    BaseSummary,
    StepRecord,
    StrategyResults,
    TrainingRun,
)
from auditrl.auditworld.policies import ExperimenterPolicy, NeverClaims, baselines
from auditrl.auditworld.training import StepStats, TrainResult, train_many
from auditrl.auditworld.world import World
from auditrl.behaviors.library import load_behaviors
from auditrl.pages.html import write_page
from auditrl.pages.sections import transcripts_section
from auditrl.rundir import run_dir_lock
from auditrl.scaffold.store import TRANSCRIPTS, write_transcripts


def build_world(cfg: AuditWorldConfig) -> World:
    """The job's world, with every family it names checked."""
    w = cfg.world
    world = World.build(load_behaviors(), w.seeds_per_behavior, w.fair_chance, w.random_state, w.scenario_topics)
    for fam in [*cfg.train_families, cfg.evaluation.family]:
        world.families.index(fam)
    return world


def run_directory(cfg: AuditWorldConfig, out_dir: Path | None) -> Path:
    """The run directory (`--out`, else the config's `out_dir`), created."""
    run_dir = Path(out_dir) if out_dir is not None else cfg.out_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def identification_ceiling(world: World) -> float:
    """Share (in %) of held-out seeds whose scenario holds a trigger: the most any auditor can identify."""
    return float(100.0 * world.identifiable(world.behavior_indices("heldout")).mean())


LOCKSTEP = 4
"""Training runs stepped together (`train_many`): enough to share the simulation's per-turn work, few enough that
a step's working memory stays in cache; each chunk's results are saved as it ends, so an interrupted job resumes."""


def _train_all(
    world: World, cfg: AuditWorldConfig, run_dir: Path, bases: dict[str, Base], console: Console
) -> dict[str, list[TrainResult]]:
    """Build the bases, then train (or resume) every (design, seed) run, with one progress bar per phase."""
    trained: dict[str, list[TrainResult]] = {d.name: [] for d in cfg.designs}
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(), console=console,
    ) as progress:  # fmt: skip
        task = progress.add_task("bases", total=len(bases) * len(cfg.seeds), info="")
        build_bases(
            world, cfg, run_dir, bases, lambda b, seed: progress.update(task, advance=1, info=f"{b.name} seed {seed}")
        )
        task = progress.add_task("training", total=len(cfg.designs) * len(cfg.seeds) * cfg.train.max_steps, info="")
        runs = [(d, seed) for d in cfg.designs for seed in cfg.seeds]
        results: dict[tuple[str, int], TrainResult] = {}
        for d, seed in runs:
            resumed = load_result(result_path(run_dir, d.name, seed), cfg.train_config(d, seed))
            if resumed is not None:
                results[d.name, seed] = resumed
                progress.update(task, advance=cfg.train.max_steps, info=f"{d.name} seed {seed}: resumed")
        todo = [(d, seed) for d, seed in runs if (d.name, seed) not in results]
        for first in range(0, len(todo), LOCKSTEP):
            chunk = todo[first : first + LOCKSTEP]

            def on_step(i: int, s: StepStats, chunk: list[tuple[DesignRun, int]] = chunk) -> None:
                d, seed = chunk[i]
                progress.update(task, advance=1, info=f"{d.name} seed {seed}: reward {s.reward:.3f}")

            fresh = train_many(
                world,
                [cfg.train_config(d, seed) for d, seed in chunk],
                cfg.judge,
                on_step,
                [bases[base_name(cfg, cfg.base_of(d))].policies[seed] for d, seed in chunk],
            )
            for (d, seed), result in zip(chunk, fresh, strict=True):
                save_result(result_path(run_dir, d.name, seed), result)
                results[d.name, seed] = result
        for d, seed in runs:
            trained[d.name].append(results[d.name, seed])
    return trained


def _evaluate_all(
    world: World, cfg: AuditWorldConfig, bases: dict[str, Base], trained: dict[str, list[TrainResult]]
) -> Evaluated:
    """Baselines, then bases, then trained designs (each paired with its base)."""
    ev = Evaluated()
    scripted = [*baselines(cfg.world.blind_claim_rate), NeverClaims(ExperimenterPolicy())]
    for p in scripted:
        ev.add(world, cfg, p.name, "baseline", [(seed, p) for seed in cfg.seeds])
    for b in bases.values():
        ev.add(world, cfg, b.name, "base", [(seed, b.policies[seed]) for seed in cfg.seeds])
    for d in cfg.designs:
        ev.add(
            world,
            cfg,
            d.name,
            "trained",
            [(r.config.seed, r.policy) for r in trained[d.name]],
            base=base_name(cfg, cfg.base_of(d)),
        )
    return ev


def run_from_config(config_path: Path, out_dir: Path | None = None) -> Path:
    """Run the whole AuditWorld job, holding its run directory's lock (auditrl.rundir); returns the run directory."""
    t0, cpu0 = time.perf_counter(), time.process_time()
    cfg = load_config(Path(config_path))
    run_dir = run_directory(cfg, out_dir)
    console = Console()
    with run_dir_lock(run_dir, on_note=lambda note: console.print(note, highlight=False, soft_wrap=True)):
        return _run_job(cfg, run_dir, console, t0, cpu0)


def _run_job(cfg: AuditWorldConfig, run_dir: Path, console: Console, t0: float, cpu0: float) -> Path:
    """The job itself, in a run directory this process holds."""
    world = build_world(cfg)
    ceiling = identification_ceiling(world)
    console.print(
        f"[bold]AuditWorld[/bold]: {len(world.behaviors.ids)} behaviors "
        f"({int(world.behaviors.heldout.sum())} held out), {world.n_topics} topics, "
        f"train families {', '.join(cfg.train_families)}, evaluation family {cfg.evaluation.family}"
    )
    bases = job_bases(cfg)
    trained = _train_all(world, cfg, run_dir, bases, console)
    train_seconds = sum(r.cpu_seconds for rs in trained.values() for r in rs)
    train_episodes = sum(r.episodes for rs in trained.values() for r in rs)
    with console.status("evaluating on held-out behaviors"):
        ev = _evaluate_all(world, cfg, bases, trained)
    rows = ev.rows
    for table in terminal_tables(cfg, rows, bases, ceiling):
        console.print(table.terminal())
    for paragraph in terminal_summary(cfg, rows, bases, ceiling):
        console.print(paragraph, soft_wrap=False)

    with console.status("clustering strategies"):
        clusters = cluster_strategies(
            strategy_summaries(ev.samples), k=cfg.analysis.clusters, seed=cfg.seeds[0], embedder=cfg.analysis.embedder
        )
    category_dist = clusters.distribution(
        ev.groups, level="category"
    )  # drawn in the HTML page (one column per auditor)
    from_base = [d for d in cfg.designs if d.init is None]  # the paper's setting: RL from a competent base
    best = max((d.name for d in from_base), key=lambda n: rows[n].seeds["composite"].mean, default=None)
    runs = [(d.name, d.design, d.benign_fraction) for d in from_base]
    convergence = strategy_convergence(clusters, ev.groups, runs, best, ev.sample_seeds)
    console.print(convergence_table(convergence, clusters).to_rich())

    write_transcripts(run_dir / TRANSCRIPTS, ev.saved)
    results = AuditWorldResults(
        config=json.loads(cfg.model_dump_json()),
        behaviors={"train": [world.behaviors.ids[i] for i in world.behavior_indices("train")],
                   "heldout": [world.behaviors.ids[i] for i in world.behavior_indices("heldout")]},
        identification_ceiling=ceiling,
        never_claims=NEVER_CLAIMS,
        bases={b.name: BaseSummary(label=b.label(), init=b.init.model_dump(mode="json"), cpu_seconds=b.seconds,
                                   facts={str(s): f for s, f in b.facts.items()}) for b in bases.values()},
        results={
            name: AuditorResult(kind=row.kind, base=row.base, estimates=row.suite.estimates(),
                                across_training_seeds=row.seeds, trained_minus_base=row.delta,
                                constant_metrics=row.constant, audit_quality_dimensions=row.dimensions,
                                diagnostics=row.diagnostics)
            for name, row in rows.items()
        },
        intervals=INTERVALS,
        training={
            name: [TrainingRun(seed=r.config.seed, seconds=r.seconds, cpu_seconds=r.cpu_seconds, episodes=r.episodes,
                               history=[StepRecord(**asdict(s)) for s in r.history]) for r in rs]
            for name, rs in trained.items()
        },
        throughput_episodes_per_cpu_second=train_episodes / train_seconds if train_seconds > 0 else None,
        strategies=StrategyResults(classifier=clusters.classifier, category_shares=category_dist,
                                   archetypes={t.id: a for t, a in zip(ev.samples, clusters.archetypes, strict=True)},
                                   convergence=convergence, clusters=clusters.clusters),
        runtime_seconds=time.perf_counter() - t0,
        cpu_seconds=time.process_time() - cpu0,
    )  # fmt: skip
    sections = report_sections(cfg, rows, bases, trained, clusters, ev.groups, results, convergence)
    results.write(run_dir)
    names = clusters.label_names("archetype")
    kept = cfg.analysis.transcripts_saved
    saved = transcripts_section(
        ev.saved,
        limit=2 * len(rows),
        source=f"the first {kept} planted and benign held-out audits of each auditor per seed",
        archetypes={tid: names[a] for tid, a in results.strategies.archetypes.items()},
    )
    report = write_page(run_dir / "report.html", f"AuditWorld: {cfg.name}", [*sections, saved])
    console.print(
        f"trained {train_episodes:,} episodes in {train_seconds:.1f} CPU s "
        f"({results.throughput_episodes_per_cpu_second or 0:,.0f} episodes per CPU-second); bases "
        f"{sum(b.seconds for b in bases.values()):.1f} CPU s; total {results.runtime_seconds:.1f} s wall, "
        f"{results.cpu_seconds:.1f} CPU s (CPU capability {torch.backends.cpu.get_cpu_capability()})"
    )
    console.print(f"page: {report}")
    return run_dir
