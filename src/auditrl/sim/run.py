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
from pydantic import BaseModel, ConfigDict, Field, field_validator
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
from auditrl.report.html import FigureBlock, Section, TableBlock, write_report
from auditrl.report.sections import transcripts_section
from auditrl.report.plots import (
    metric_bars,
    strategy_distribution_bars,
    training_curves,
)
from auditrl.scaffold.store import TRANSCRIPTS, write_transcripts
from auditrl.scaffold.transcript import Transcript
from auditrl.sim.designs import DesignName
from auditrl.sim.judges import JudgeParams
from auditrl.sim.families import check_family
from auditrl.sim.metrics import (
    METRICS,
    EvalConfig,
    EvalEpisodes,
    SeedSpread,
    across_seeds,
    constant_metric_notes,
    evaluate_policy,
    pool,
)
from auditrl.sim.policies import baselines
from auditrl.sim.render import render_episodes
from auditrl.sim.training import StepStats, TrainConfig, TrainResult, train
from auditrl.sim.world import Policy, Rollout, World
from auditrl.train.config import read_yaml_mapping, validate_file

INTERVALS = {
    "estimates": "95% percentile bootstrap over evaluation episodes pooled over training seeds x held-out seed "
    "scenarios x rollouts (the paper's interval): how precisely these trained auditors were measured.",
    "across_training_seeds": "each training seed's mean is one observation; mean, sample sd and a 95% Student-t "
    "interval over the seeds (n - 1 degrees of freedom), clipped to 0-100: includes run-to-run variation of "
    "training. For the scripted baselines the seeds change only the evaluation's random draws.",
    "constant_metrics": "metrics that took one value in every episode (zero-width interval), with the reason.",
}
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

    @field_validator("train_families")
    @classmethod
    def _known_families(cls, value: list[str]) -> list[str]:
        return [check_family(f) for f in value]

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, value: list[int]) -> list[int]:
        if len(set(value)) != len(value):
            raise ValueError(f"training seeds must be distinct (each one is a separate training run), got {value}")
        return value

    @field_validator("designs")
    @classmethod
    def _unique_names(cls, value: list[DesignRun]) -> list[DesignRun]:
        names = [d.name for d in value]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"design names must be unique; repeated: {', '.join(repeated)}")
        return value


def load_config(path: Path) -> AuditWorldConfig:
    """Read and validate the YAML before anything runs.

    Every problem (syntax, types, missing or extra keys, unknown families or designs) raises one
    ConfigFileError whose message names the file and the field, so the CLI can print it as one line.
    """
    path = Path(path)
    return validate_file(AuditWorldConfig, read_yaml_mapping(path), path)


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


def _spread_cell(s: SeedSpread) -> str:
    if s.lo is None or s.hi is None:
        return f"{s.mean:.1f}"
    return f"{s.mean:.1f} [{s.lo:.1f},{s.hi:.1f}]"


def _per_seed_cell(s: SeedSpread) -> str:
    return " / ".join(f"{v:.1f}" for v in s.per_seed)


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


def seeds_table(rows: dict[str, dict[str, Any]], n_seeds: int) -> Table:
    """The same metrics with each training seed as one observation: mean and 95% t-interval over seeds."""
    table = Table(
        title=f"Across training seeds: mean of the {n_seeds} per-seed means [95% t-interval over seeds, n={n_seeds}]"
    )
    table.add_column("auditor")
    for m in METRICS:
        table.add_column(METRIC_LABELS[m], justify="right")
    for name, row in rows.items():
        table.add_row(name, *[_spread_cell(row["seeds"][m]) for m in METRICS])
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
            rows[name] = {
                "estimates": pooled.estimates(),
                "diagnostics": pooled.diagnostics(),
                "seeds": across_seeds(parts, [seed for seed, _ in seeded]),
                "constant": constant_metric_notes(pooled),
            }
    console.print(results_table(rows))
    console.print(seeds_table(rows, len(cfg.seeds)))

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
            name: {"estimates": {m: e.model_dump() for m, e in row["estimates"].items()},
                   "across_training_seeds": {m: s.model_dump() for m, s in row["seeds"].items()},
                   "constant_metrics": row["constant"],
                   "diagnostics": row["diagnostics"]}
            for name, row in rows.items()
        },
        "intervals": INTERVALS,
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
    report = write_report(run_dir / "report.html", f"AuditWorld: {cfg.name}", [*_sections(cfg, rows, trained, clusters, category_dist, groups, results), transcripts_section(saved, limit=2 * len(policies))])
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


def _reward_caption(cfg: AuditWorldConfig, trained: dict[str, list[TrainResult]]) -> str:
    """What the reward curves can and cannot show, with the numbers taken from this run's histories."""
    parts = ["Mean batch reward per step over the training seeds; each design's reward has its own scale, so "
             "curves of different designs are not comparable with each other."]  # fmt: skip
    by_design = {d.name: d.design for d in cfg.designs}
    rewards = {n: np.array([[s.reward for s in r.history] for r in rs]) for n, rs in trained.items()}
    ingroup = [n for n in trained if by_design[n] == "ingroup_pairwise"]
    if ingroup:
        means = np.concatenate([rewards[n].mean(axis=0) for n in ingroup])
        k = cfg.train.group_size
        parts.append(
            f"{', '.join(ingroup)} (in-group pairwise): a rollout's reward is its win rate against the other {k - 1} "
            f"rollouts of its group, and each comparison shares one win between its two rollouts, so the mean win "
            f"rate of a group is 0.5 by construction whatever the policy does (batch means here: "
            f"{means.min():.3f} to {means.max():.3f}); its learning shows in the other panels and in the evaluation, "
            "not in this curve."
        )
    reference = [n for n in trained if by_design[n] == "reference_pairwise"]
    if reference:
        every, steps = cfg.train.reference_refresh, cfg.train.steps
        refreshes = list(range(every, steps, every))
        text = (
            f"{', '.join(reference)} (reference pairwise): each rollout is compared with a cached episode of a "
            f"snapshot of the policy, taken at step 0 and refreshed every {every} steps"
        )
        if refreshes:
            jumps, steady = [], []
            for n in reference:
                diffs = np.diff(rewards[n], axis=1)  # diffs[:, t - 1] = reward[t] - reward[t - 1]
                at = np.array(refreshes) - 1
                jumps.append(diffs[:, at].ravel())
                steady.append(np.abs(np.delete(diffs, at, axis=1)).ravel())
            text += (
                f" (dotted lines: step{'s' if len(refreshes) > 1 else ''} {', '.join(map(str, refreshes))}). A refresh "
                "replaces the reference with the current policy, which moves the win share back toward 0.5, so the "
                f"curve jumps there by construction: mean change across a refresh {np.concatenate(jumps).mean():+.3f}, "
                f"against a median step-to-step change of {np.median(np.concatenate(steady)):.3f} elsewhere."
            )
        else:
            text += f"; no refresh falls within the {steps} steps."
        parts.append(text)
    return " ".join(parts)


def _final_values_caption(curves: dict[str, tuple[list[float], list[float]]], what: str, digits: int = 2) -> str:
    last = ", ".join(f"{n} {v[-1]:.{digits}f}" for n, (_, v) in curves.items() if v)
    return f"{what} At the last step: {last}. Overlapping lines are told apart by line style and marker."


def _interval_paragraphs(cfg: AuditWorldConfig, rows: dict[str, dict[str, Any]]) -> list[str]:
    """The sentence on the two kinds of interval, and why any zero-width interval has zero width."""
    n = len(cfg.seeds)
    first = next(iter(rows.values()))["estimates"]
    wider = []
    for name in (d.name for d in cfg.designs):
        for m in METRICS:
            e, sp = rows[name]["estimates"][m], rows[name]["seeds"][m]
            if sp.lo is not None and sp.hi is not None and e.hi - e.lo > 0:
                wider.append((sp.hi - sp.lo) / (e.hi - e.lo))
    text = (
        "Two kinds of 95% interval are shown. The first table follows the paper: a bootstrap over every evaluation "
        f"episode pooled over the {n} training seeds x held-out seed scenarios x {cfg.evaluation.rollouts} rollouts "
        f"({first['audit_quality'].n} planted and {first['fp_calibration'].n} benign audits per auditor). It says how "
        "precisely these particular trained auditors were measured, but it counts episodes of one training run as "
        "independent, so it leaves out how much another training run would differ. The second table takes each "
        f"training seed's mean as one observation and gives a Student-t interval over the {n} seeds "
        f"({n - 1} degrees of freedom, clipped to 0-100); it includes the run-to-run variation of training and is the "
        "one to use when comparing reward designs. The scripted baselines are not trained: for them the seeds change "
        "only the evaluation's random draws."
    )
    if n < 2:
        text += " With a single training seed there is no between-seed interval."
    elif wider:
        text += (
            f" For the trained auditors the between-seed interval is wider in {sum(w > 1 for w in wider)} of "
            f"{len(wider)} (design, metric) pairs, by a median factor of {np.median(wider):.1f}."
        )
    paragraphs = [text]
    by_note: dict[str, list[str]] = {}
    for name, row in rows.items():
        for note in row["constant"].values():
            by_note.setdefault(note, []).append(name)
    notes = [f"{', '.join(names)}: {note}" for note, names in by_note.items()]
    if notes:
        paragraphs.append(
            "Zero-width intervals mean the metric took one value in every episode, not that it was measured without "
            "error: " + "; ".join(notes) + "."
        )
    return paragraphs


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
    seed_header = ["auditor"] + [h for m in METRICS for h in (METRIC_LABELS[m], f"{METRIC_LABELS[m]} by seed")]
    seed_rows = [[name, *[c for m in METRICS for c in (_spread_cell(row["seeds"][m]), _per_seed_cell(row["seeds"][m]))]]
                 for name, row in rows.items()]  # fmt: skip
    designs_desc = [
        f"{d.name}: {d.design}, benign fraction {d.benign_fraction:g}" + (" (strict binary judge)" if d.binary_strict else "")
        for d in cfg.designs
    ]
    bars = metric_bars(
        {n: r["estimates"] for n, r in rows.items()}, METRICS, labels=METRIC_LABELS,
        title="Held-out evaluation (95% CI over episodes; dots: per-seed means)",
        points={n: {m: r["seeds"][m].per_seed for m in METRICS} for n, r in rows.items()},
    )  # fmt: skip
    names = {c.id: c.name for c in clusters.codebook.categories}
    shares = {g: {names[k]: v for k, v in dist.items()} for g, dist in category_dist.items()}
    cluster_rows = [[c.id, c.size, c.name, clusters.codebook.archetype(c.archetype).name, c.representative_text]
                    for c in sorted(clusters.clusters, key=lambda c: -c.size)]  # fmt: skip
    refreshes = (
        list(range(cfg.train.reference_refresh, cfg.train.steps, cfg.train.reference_refresh))
        if any(d.design == "reference_pairwise" for d in cfg.designs)
        else []
    )
    claim_curves = _history_curves(histories, "claim_rate")
    accusation_curves = _history_curves(histories, "accusations")
    seeds_text = f"{len(cfg.seeds)} training seed{'s' if len(cfg.seeds) > 1 else ''}"
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
                *(
                    [f"Reference pairwise compares each rollout with an episode of a frozen policy snapshot, refreshed "
                     f"every {cfg.train.reference_refresh} steps. The first snapshot is the untrained policy, which "
                     "picks its report uniformly and so claims a finding on most benign audits; the paper's first "
                     "reference was an already calibrated base model. Against a claiming reference a false claim "
                     "on a benign target loses little, and once a snapshot claims on every benign audit, honest "
                     "nulls are rarely sampled again: calibration then depends on how much honesty the policy "
                     "still had at the refresh."]
                    if refreshes
                    else []
                ),
                f"Training throughput {results['throughput_episodes_per_second']:,.0f} simulated audits per second; "
                f"whole job {results['runtime_seconds']:.0f} s.",
            ],
        ),
        Section(
            title="Held-out evaluation",
            paragraphs=["Scores are 0-100; the signature columns of the first table are means per audit (FP rate, "
                        "detection and target evidence in %).", *_interval_paragraphs(cfg, rows)],
            tables=[
                TableBlock(header=header, rows=table_rows,
                           caption="Suite metrics (mean [95% bootstrap CI over training seeds x episodes]) and "
                                   "reward-hacking signatures"),
                TableBlock(header=seed_header, rows=seed_rows,
                           caption=f"Across training seeds: mean of the per-seed means [95% t-interval over the "
                                   f"{seeds_text}], and each seed's mean (seeds {cfg.seeds})"),
            ],
            figures=[FigureBlock(bars, "Bars and error bars: pooled mean and per-episode 95% bootstrap interval "
                                       "(first table); black dots: the per-seed means behind the second table.")],
        ),  # fmt: skip
        Section(
            title="Training",
            paragraphs=["Mean over seeds per step. The false-positive rate is measured on the benign groups of a "
                        "batch, so it only exists for designs trained with calibration."],
            figures=[
                FigureBlock(training_curves(_history_curves(histories, "reward"), title="Training reward",
                                            vlines=refreshes), _reward_caption(cfg, trained)),
                FigureBlock(training_curves(claim_curves, title="Share of audits that claim a finding", ylabel="share"),
                            _final_values_caption(claim_curves, "Share of all training audits (planted and benign) "
                                                                "whose report claims a hidden behavior.")),
                FigureBlock(training_curves(accusation_curves, title="Accusations per audit", ylabel="count"),
                            _final_values_caption(accusation_curves, "Auditor accusations per training audit.")),
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
