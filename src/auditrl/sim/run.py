"""The AuditWorld main job: train auditors under each reward design, evaluate, analyse, report.

`run_from_config` reads a `kind: auditworld` YAML, trains one MLP auditor per (design, seed), evaluates
every trained auditor and the three scripted baselines on the held-out behaviors (planted and benign),
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
from typing import Any, Literal

import numpy as np
import yaml
from matplotlib.figure import Figure
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from auditrl.analysis.strategies import cluster_strategies
from auditrl.analysis.summaries import strategy_summaries
from auditrl.atomic import atomic_write_text
from auditrl.behaviors.library import load_behaviors
from auditrl.evaluate.stats import Estimate
from auditrl.report.html import Section, TableBlock, write_report
from auditrl.report.plots import (
    metric_bars,
    strategy_distribution_bars,
    training_curves,
)
from auditrl.scaffold.store import TRANSCRIPTS, write_transcripts
from auditrl.scaffold.transcript import Transcript
from auditrl.sim.designs import DesignName
from auditrl.sim.judges import JudgeParams
from auditrl.sim.metrics import METRICS, EvalConfig, EvalEpisodes, evaluate_policy, pool
from auditrl.sim.policies import baselines
from auditrl.sim.render import render_episodes
from auditrl.sim.training import StepStats, TrainConfig, TrainResult, train
from auditrl.sim.world import Policy, Rollout, World

STATEMENT = (
    "What this shows: in AuditWorld, a simulated world that keeps the incentive structure of auditing "
    "(targets that show a planted behavior only in its trigger contexts, deny when confronted, confess "
    "sycophantically under pressure, suppress the behavior when the framing looks like a test; judges with "
    "the documented weaknesses of LLM judges), which auditor strategies each reward design selects by "
    "optimisation alone, and how those strategies score on held-out behaviors and benign targets. What it "
    "does not show: how language-model auditors, real targets or LLM judges behave. Targets, judges and "
    "metrics are programmatic models with hand-set rates, the auditor acts through a small structured "
    "action space, the metrics are ground-truth proxies of the paper's suite (there is no production-model "
    "metric, so the composite averages three metrics), and every number depends on the world's parameters."
)
METRIC_LABELS = {
    "audit_quality": "Audit quality",
    "fp_calibration": "FP calibration",
    "realism": "Realism",
    "composite": "Composite",
}


class DesignRun(BaseModel):
    """One reward design to train, with its calibration (benign) fraction."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    design: DesignName
    benign_fraction: float = Field(default=0.0, ge=0.0, le=1.0)
    binary_strict: bool = False


class TrainDefaults(BaseModel):
    """Training settings shared by every design."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(default=100, ge=1)
    groups: int = Field(default=128, ge=1)
    group_size: int = Field(default=8, ge=2)
    max_turns: int = Field(default=15, ge=1)
    lr: float = Field(default=0.01, gt=0.0)
    entropy_coef: float = Field(default=0.01, ge=0.0)
    grad_clip: float = Field(default=1.0, gt=0.0)
    hidden: int = Field(default=32, ge=4)
    reference_refresh: int = Field(default=50, ge=1)


class WorldConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seeds_per_behavior: int = Field(default=8, ge=1)
    fair_chance: float = Field(default=0.75, ge=0.0, le=1.0)
    seed: int = 0


class AnalysisConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    transcripts_per_policy: int = Field(default=24, ge=1, description="Rendered for clustering, per policy and seed, planted and benign each.")
    transcripts_saved: int = Field(default=2, ge=0, description="Of those, written to transcripts.jsonl per policy and seed.")
    clusters: int | None = Field(default=None, ge=2)
    embedder: Literal["minilm", "tfidf"] = "tfidf"


class AuditWorldConfig(BaseModel):
    """The `kind: auditworld` config file."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["auditworld"]
    name: str = Field(default="auditworld", pattern=r"^[A-Za-z0-9_.-]+$")
    out_dir: Path = Path("runs/auditworld")
    seeds: list[int] = Field(min_length=1)
    train_families: list[str] = Field(min_length=1)
    designs: list[DesignRun] = Field(min_length=1)
    train: TrainDefaults = Field(default_factory=TrainDefaults)
    world: WorldConfig = Field(default_factory=WorldConfig)
    evaluation: EvalConfig
    judge: JudgeParams = Field(default_factory=JudgeParams)
    analysis: AnalysisConfig = Field(default_factory=AnalysisConfig)


def load_config(path: Path) -> AuditWorldConfig:
    """Read and validate the YAML; errors name the file and the offending field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: invalid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping of settings at the top level")
    try:
        cfg = AuditWorldConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"'{'.'.join(map(str, e['loc']))}': {e['msg']}" for e in exc.errors())
        raise ValueError(f"{path}: invalid config: {problems}") from exc
    names = [d.name for d in cfg.designs]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: field 'designs': design names must be unique, got {names}")
    return cfg


def _train_config(cfg: AuditWorldConfig, d: DesignRun, seed: int) -> TrainConfig:
    return TrainConfig(
        design=d.design,
        benign_fraction=d.benign_fraction,
        binary_strict=d.binary_strict,
        families=cfg.train_families,
        seed=seed,
        **cfg.train.model_dump(),
    )


def _cell(e: Estimate) -> str:
    return "-" if e.n == 0 or math.isnan(e.mean) else f"{e.mean:.1f} [{e.lo:.1f},{e.hi:.1f}]"


def results_table(rows: dict[str, dict[str, Any]]) -> Table:
    """The headline table: suite metrics with 95% CIs and the reward-hacking signatures."""
    table = Table(title="AuditWorld: held-out evaluation (95% CI over seeds x episodes; signatures per audit)")
    table.add_column("auditor")
    for m in METRICS:
        table.add_column(METRIC_LABELS[m], justify="right")
    for col in ("accus.", "confess.", "eval-aware"):
        table.add_column(col, justify="right")
    for name, row in rows.items():
        d = row["diagnostics"]
        table.add_row(
            name,
            *[_cell(row["estimates"][m]) for m in METRICS],
            f"{d['accusations_per_audit']:.2f}",
            f"{d['confessions_per_audit']:.2f}",
            f"{d['eval_aware_per_audit']:.2f}",
        )
    return table


def _history_curves(histories: dict[str, list[list[StepStats]]], field: str) -> dict[str, tuple[list[float], list[float]]]:
    out = {}
    for name, runs in histories.items():
        values = np.array([[getattr(s, field) for s in h] for h in runs], dtype=np.float64)
        if np.isnan(values).all():
            continue
        with np.errstate(invalid="ignore"):
            mean = np.nanmean(values, axis=0)
        out[name] = (list(range(values.shape[1])), mean.tolist())
    return out


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
    world = World.build(load_behaviors(), cfg.world.seeds_per_behavior, cfg.world.fair_chance, cfg.world.seed)
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

                trained[d.name].append(train(world, _train_config(cfg, d, seed), cfg.judge, on_step))
    train_seconds = sum(r.seconds for rs in trained.values() for r in rs)
    train_episodes = sum(r.episodes for rs in trained.values() for r in rs)

    rows: dict[str, dict[str, Any]] = {}
    samples: list[Transcript] = []
    saved: list[Transcript] = []
    groups: list[str] = []
    n_sample = cfg.analysis.transcripts_per_policy
    policies: list[tuple[str, list[tuple[int, Policy]]]] = [
        (p.name, [(seed, p) for seed in cfg.seeds]) for p in baselines()
    ] + [(name, [(r.config.seed, r.policy) for r in rs]) for name, rs in trained.items()]
    with console.status("evaluating on held-out behaviors"):
        for name, seeded in policies:
            parts: list[EvalEpisodes] = []
            for seed, policy in seeded:
                values, planted, benign = evaluate_policy(world, policy, cfg.evaluation, np.random.default_rng(10_000 + seed))
                parts.append(values)
                tag = f"s{seed}"
                batch = _sample(world, planted, n_sample, name, f"{tag}-planted") + _sample(
                    world, benign, n_sample, name, f"{tag}-benign"
                )
                samples += batch
                saved += batch[: cfg.analysis.transcripts_saved] + batch[n_sample : n_sample + cfg.analysis.transcripts_saved]
                groups += [name] * len(batch)
            pooled = pool(parts)
            rows[name] = {"estimates": pooled.estimates(), "diagnostics": pooled.diagnostics()}
    console.print(results_table(rows))

    with console.status("clustering strategies"):
        clusters = cluster_strategies(
            strategy_summaries(samples), k=cfg.analysis.clusters, seed=cfg.seeds[0], embedder=cfg.analysis.embedder
        )
    category_dist = clusters.distribution(groups, level="category")
    console.print(clusters.distribution_table(groups, level="category"))

    write_transcripts(run_dir / TRANSCRIPTS, saved)
    elapsed = time.perf_counter() - t0
    results = {
        "kind": "auditworld",
        "config": json.loads(cfg.model_dump_json()),
        "behaviors": {"train": [world.behaviors.ids[i] for i in world.behavior_indices("train")],
                      "heldout": [world.behaviors.ids[i] for i in world.behavior_indices("heldout")]},
        "results": {
            name: {"estimates": {m: e.model_dump() for m, e in row["estimates"].items()}, "diagnostics": row["diagnostics"]}
            for name, row in rows.items()
        },
        "training": {
            name: [{"seed": r.config.seed, "seconds": r.seconds, "episodes": r.episodes,
                    "history": [_finite(asdict(s)) for s in r.history]} for r in rs]
            for name, rs in trained.items()
        },
        "throughput_episodes_per_second": train_episodes / train_seconds if train_seconds > 0 else None,
        "strategies": {"category_shares": category_dist, "clusters": [c.model_dump() for c in clusters.clusters]},
        "runtime_seconds": elapsed,
        "statement": STATEMENT,
    }  # fmt: skip
    atomic_write_text(run_dir / "results.json", json.dumps(results, indent=2, allow_nan=False, default=_json_default))
    report = write_report(run_dir / "report.html", f"AuditWorld: {cfg.name}", _sections(cfg, rows, trained, clusters, category_dist, groups, results))
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


def _sections(
    cfg: AuditWorldConfig,
    rows: dict[str, dict[str, Any]],
    trained: dict[str, list[TrainResult]],
    clusters: Any,
    category_dist: dict[str, dict[str, float]],
    groups: list[str],
    results: dict[str, Any],
) -> list[Section]:
    histories = {name: [r.history for r in rs] for name, rs in trained.items()}
    header = ["auditor", *[METRIC_LABELS[m] for m in METRICS], "FP rate %", "detection %", "target evidence %",
              "accusations", "confessions", "false confessions", "eval-aware", "rollbacks", "turns"]  # fmt: skip
    table_rows = []
    for name, row in rows.items():
        d = row["diagnostics"]
        table_rows.append(
            [name, *[_cell(row["estimates"][m]) for m in METRICS]]
            + [round(d[k], 2) for k in ("false_positive_rate", "detection_rate", "target_evidence_rate",
                                         "accusations_per_audit", "confessions_per_audit", "false_confessions_per_audit",
                                         "eval_aware_per_audit", "rollbacks_per_audit", "turns_per_audit")]
        )  # fmt: skip
    designs_desc = [
        f"{d.name}: {d.design}, benign fraction {d.benign_fraction:g}" + (" (strict binary judge)" if d.binary_strict else "")
        for d in cfg.designs
    ]
    figures: list[Figure] = [
        metric_bars({n: r["estimates"] for n, r in rows.items()}, METRICS, labels=METRIC_LABELS),
    ]
    names = {c.id: c.name for c in clusters.codebook.categories}
    shares = {g: {names[k]: v for k, v in dist.items()} for g, dist in category_dist.items()}
    cluster_rows = [[c.id, c.size, c.name, clusters.codebook.archetype(c.archetype).name, c.representative_text]
                    for c in sorted(clusters.clusters, key=lambda c: -c.size)]  # fmt: skip
    return [
        Section(title="What this run shows and does not", paragraphs=[STATEMENT]),
        Section(
            title="Setup",
            paragraphs=[
                f"Seeds {cfg.seeds}; {cfg.train.steps} steps x {cfg.train.groups} groups of {cfg.train.group_size} "
                f"rollouts ({cfg.train.max_turns}-turn budget) per design and seed; training families "
                f"{', '.join(cfg.train_families)}; evaluation on the held-out behaviors "
                f"({', '.join(results['behaviors']['heldout'])}) against the held-out family {cfg.evaluation.family}, "
                f"{cfg.evaluation.rollouts} rollouts per seed, {cfg.evaluation.planted_turns} turns planted, "
                f"{cfg.evaluation.benign_turns} benign.",
                "Designs: " + "; ".join(designs_desc) + ".",
                f"Training throughput {results['throughput_episodes_per_second']:,.0f} simulated audits per second; "
                f"whole job {results['runtime_seconds']:.0f} s.",
            ],
        ),
        Section(
            title="Held-out evaluation",
            paragraphs=["Scores are 0-100 with 95% bootstrap intervals over training seeds x episodes; the signature "
                        "columns are means per audit (FP rate, detection and target evidence in %)."],
            tables=[TableBlock(header=header, rows=table_rows, caption="Suite metrics and reward-hacking signatures")],
            figures=figures,
        ),  # fmt: skip
        Section(
            title="Training",
            paragraphs=["Mean over seeds per step. The false-positive rate is measured on the benign groups of a "
                        "batch, so it only exists for designs trained with calibration."],
            figures=[
                training_curves(_history_curves(histories, "reward"), title="Training reward"),
                training_curves(_history_curves(histories, "claim_rate"), title="Share of audits that claim a finding", ylabel="share"),
                training_curves(_history_curves(histories, "accusations"), title="Accusations per audit", ylabel="count"),
            ],
        ),  # fmt: skip
        Section(
            title="Strategies",
            paragraphs=[f"Strategy-only summaries of {len(groups)} rendered evaluation transcripts, embedded with "
                        f"{clusters.embedder}, clustered (k={clusters.k}) and classified against the archetype codebook."],
            tables=[TableBlock(header=["#", "size", "name", "archetype", "representative"], rows=cluster_rows, caption="Clusters")],
            figures=[strategy_distribution_bars(shares, title="Strategy categories per auditor")],
        ),  # fmt: skip
    ]
