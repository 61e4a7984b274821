"""The AuditWorld report: the headline first, then the base, the assumptions, the details and the training.

The prose lives in templates (auditworld/templates), filled with this run's numbers only, so the text
says whatever training produced; the tables are `auditrl.auditworld.job.tables`, drawn the same way in the
terminal and in the HTML page.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2
import numpy as np

from auditrl.analysis.convergence import ConvergenceRow
from auditrl.analysis.strategies import StrategyClusters
from auditrl.auditworld.job import tables
from auditrl.auditworld.job.bases import Base
from auditrl.auditworld.job.config import AuditWorldConfig
from auditrl.auditworld.job.evaluation import PolicyEvaluation
from auditrl.auditworld.job.results import AuditWorldResults
from auditrl.auditworld.metrics import HEADLINE, IDENTIFIED, METRICS
from auditrl.auditworld.training import StepStats, TrainResult
from auditrl.evaluate.schema import METRIC_TITLES
from auditrl.pages.html import FigureBlock, Section
from auditrl.pages.plots import metric_bars, training_curves
from auditrl.pages.sections import strategy_section
from auditrl.rewards.registry import design_spec

INTERVALS = {
    "across_training_seeds": "each training seed's mean is one observation; mean, sample sd and a 95% Student-t "
    "interval over the seeds (n - 1 degrees of freedom), clipped to 0-100: includes run-to-run variation of "
    "training. For the scripted baselines the seeds change only the evaluation's random draws.",
    "trained_minus_base": "each training seed's trained auditor minus the base of the same seed (evaluated on the "
    "same draws); mean and a 95% Student-t interval over the seeds, clipped to -100 to 100.",
    "estimates": "95% percentile bootstrap over evaluation episodes pooled over training seeds x held-out seed "
    "scenarios x rollouts (the paper's interval): how precisely these auditors were measured.",
    "constant_metrics": "metrics that took one value in every episode (zero-width interval), with the reason.",
}
NEVER_CLAIMS = "experimenter, no claims"
"""The row whose composite is what an auditor that never claims anything gets in this world."""


@functools.cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("auditrl.auditworld.job", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # plain text: the HTML page escapes every string it is given
    )


def prose(template: str, **context: Any) -> list[str]:
    """A template's paragraphs (separated by blank lines), each on one line with single spaces."""
    text = _env().get_template(template).render(**context)
    paragraphs = [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", text)]
    return [re.sub(r" ([.,;])", r"\1", p) for p in paragraphs if p]


def _means(row: PolicyEvaluation) -> dict[str, Any]:
    return {"name": row.name, **{m: row.seeds[m].mean for m in HEADLINE}}


def headline_facts(
    cfg: AuditWorldConfig, rows: Mapping[str, PolicyEvaluation], bases: Mapping[str, Base], ceiling: float
) -> dict[str, Any]:
    """What the headline paragraphs state: the base, the never-claiming floor, and how each design moved."""
    trained = [r for r in rows.values() if r.delta is not None and r.base == "base"]
    beyond = lambda r, m, sign: r.delta[m].lo is not None and (r.delta[m].lo > 0 if sign > 0 else r.delta[m].hi < 0)
    ablation = [r for r in rows.values() if r.delta is not None and r.base != "base"]
    return {
        "base": {"label": bases["base"].label(), **_means(rows["base"])},
        "silent": _means(rows[NEVER_CLAIMS]),
        "ceiling": ceiling,
        "ident_up": [r.name for r in trained if beyond(r, IDENTIFIED, 1)],
        "ident_down": [r.name for r in trained if beyond(r, IDENTIFIED, -1)],
        "fp_down": [r.name for r in trained if beyond(r, "false_positive", -1)],
        "fp_kept": [r.name for r in trained if not beyond(r, "false_positive", -1)],
        "composite_up": [r.name for r in trained if beyond(r, "composite", 1)],
        "composite_down": [r.name for r in trained if beyond(r, "composite", -1)],
        "best": _means(max(trained, key=lambda r: r.seeds["composite"].mean)) if trained else None,
        "ablation": [_means(r) for r in ablation],
        "ablation_label": next((bases[r.base].label() for r in ablation if r.base is not None and r.base in bases), ""),
        "flaws": cfg.judge.flaws.model_dump(),
    }


def ingroup_doses(cfg: AuditWorldConfig) -> dict[float, str]:
    """In-group pairwise designs from the job's base, by benign fraction (the dose-response)."""
    return {d.benign_fraction: d.name for d in cfg.designs if d.design == "ingroup_pairwise" and d.init is None}


def competence_table(bases: Mapping[str, Base]) -> tables.Table | None:
    """Configured and reached agreement of the job's base with its expert, averaged over seeds."""
    facts = [f["agreement"] for f in bases["base"].facts.values() if "agreement" in f]
    if not facts:
        return None
    mean = {
        part: {h: float(np.mean([f[part][h] for f in facts])) for h in facts[0][part]}
        for part in ("expected", "measured")
    }
    return tables.competence(bases["base"].label(), mean)


def headline_tables(cfg: AuditWorldConfig, rows: Mapping[str, PolicyEvaluation], ceiling: float) -> list[tables.Table]:
    """The tables the report and the terminal open with."""
    n = len(cfg.seeds)
    return [
        tables.headline(rows, ceiling, n),
        tables.differences(rows, n),
        tables.dose_response(rows, ingroup_doses(cfg)),
        tables.paper_rows(),
    ]


def _curves(histories: Mapping[str, list[list[StepStats]]], name: str) -> dict[str, tuple[list[int], list[float]]]:
    out: dict[str, tuple[list[int], list[float]]] = {}
    for design, runs in histories.items():
        values = np.array([[getattr(s, name) for s in h] for h in runs], dtype=np.float64)
        if np.isnan(values).all():
            continue
        with np.errstate(invalid="ignore"):
            out[design] = (list(range(values.shape[1])), np.nanmean(values, axis=0).tolist())
    return out


def reward_caption(cfg: AuditWorldConfig, trained: Mapping[str, list[TrainResult]]) -> str:
    """What the reward curves can and cannot show, with the numbers taken from this run's histories."""
    by_design = {d.name: d.design for d in cfg.designs}
    rewards = {n: np.array([[s.reward for s in r.history] for r in rs]) for n, rs in trained.items()}
    ingroup = [n for n in trained if by_design[n] == "ingroup_pairwise"]
    reference = [n for n in trained if design_spec(by_design[n]).references]
    every, steps = cfg.train.reference_refresh_steps, cfg.train.max_steps
    refreshes = list(range(every, steps, every))
    ctx: dict[str, Any] = {"ingroup": ingroup, "reference": reference, "k": cfg.train.group_size, "every": every,
                           "steps": steps, "refreshes": refreshes, "jump": 0.0, "steady": 0.0}  # fmt: skip
    if ingroup:
        means = np.concatenate([rewards[n].mean(axis=0) for n in ingroup])
        ctx.update(ingroup_lo=float(means.min()), ingroup_hi=float(means.max()))
    if reference and refreshes:
        at = np.array(refreshes) - 1
        diffs = [np.diff(rewards[n], axis=1) for n in reference]  # diffs[:, t - 1] = reward[t] - reward[t - 1]
        ctx["jump"] = float(np.concatenate([d[:, at].ravel() for d in diffs]).mean())
        ctx["steady"] = float(np.median(np.concatenate([np.abs(np.delete(d, at, axis=1)).ravel() for d in diffs])))
    return " ".join(prose("reward_caption.txt.j2", **ctx))


def _curve_figure(curves: dict[str, tuple[list[int], list[float]]], title: str, ylabel: str, what: str) -> FigureBlock:
    last = [(n, v[-1]) for n, (_, v) in curves.items() if v]
    return FigureBlock(
        training_curves(curves, title=title, ylabel=ylabel),
        " ".join(prose("curve_caption.txt.j2", what=what, last=last)),
    )


def _pooled(rows: Mapping[str, PolicyEvaluation]) -> tables.Table:
    return tables.Table(
        title="Pooled over seeds x episodes: mean [95% bootstrap CI]",
        header=["auditor", *[tables.SHORT[m] for m in METRICS]],
        rows=[[name, *[r.suite.cell(m) for m in METRICS]] for name, r in rows.items()],
        caption="The paper's interval: a bootstrap over every evaluation episode.",
    )


def report_sections(
    cfg: AuditWorldConfig,
    rows: Mapping[str, PolicyEvaluation],
    bases: Mapping[str, Base],
    trained: Mapping[str, list[TrainResult]],
    clusters: StrategyClusters,
    groups: list[str],
    results: AuditWorldResults,
    convergence: Sequence[ConvergenceRow] = (),
) -> list[Section]:
    ceiling = results.identification_ceiling
    head = headline_tables(cfg, rows, ceiling)
    base = bases["base"]
    competence = competence_table(bases)
    first = next(iter(rows.values())).suite.estimates()
    notes: dict[str, list[str]] = {}
    for name, row in rows.items():
        for note in row.constant.values():
            notes.setdefault(note, []).append(name)
    dims = rows["blind"].dimensions if "blind" in rows else {}
    chance = (
        100.0
        * round(cfg.world.fair_chance * cfg.world.seeds_per_behavior)
        / cfg.world.seeds_per_behavior
        / cfg.world.scenario_topics
    )
    histories = {name: [r.history for r in rs] for name, rs in trained.items()}
    refresh = any(design_spec(d.design).references for d in cfg.designs)
    vlines = (
        list(range(cfg.train.reference_refresh_steps, cfg.train.max_steps, cfg.train.reference_refresh_steps))
        if refresh
        else []
    )
    designs = [{**d.model_dump(), "base": next(r.base for r in rows.values() if r.name == d.name)} for d in cfg.designs]
    bars = metric_bars({n: r.suite.estimates() for n, r in rows.items()}, metrics=list(METRICS), labels=METRIC_TITLES,
                       points={n: {m: r.seeds[m].per_seed for m in METRICS} for n, r in rows.items()})  # fmt: skip
    return [
        Section(title="Headline", tables=[t.html() for t in head[:2]]),
        Section(
            title="What the headline shows",
            paragraphs=prose("headline.txt.j2", **headline_facts(cfg, rows, bases, ceiling)),
        ),
        Section(title="Calibration dose-response and the paper", tables=[t.html() for t in head[2:]]),
        Section(
            title="The base auditor",
            tables=[competence.html()] if competence else [],
            paragraphs=prose(
                "base.txt.j2", kind=base.init.kind, init=base.init, seconds=sum(b.seconds for b in bases.values())
            ),
        ),  # fmt: skip
        Section(
            title="What this run shows and does not",
            paragraphs=prose(
                "assumptions.txt.j2",
                flaws=cfg.judge.flaws,
                world=cfg.world,
                base_label=base.label(),
                blind=_means(rows["blind"]) if "blind" in rows else None,
                experimenter=_means(rows["experimenter"]) if "experimenter" in rows else None,
                blind_claim_rate=cfg.world.blind_claim_rate,
                chance=chance,
                blind_dims=dims,
            ),
        ),  # fmt: skip
        Section(
            title="Setup",
            paragraphs=prose(
                "setup.txt.j2",
                seeds=cfg.seeds,
                train=cfg.train,
                families=cfg.train_families,
                heldout=results.behaviors["heldout"],
                evaluation=cfg.evaluation,
                designs=designs,
                refresh=refresh,
                throughput=results.throughput_episodes_per_cpu_second or 0.0,
                runtime=results.runtime_seconds,
            ),
        ),  # fmt: skip
        Section(
            title="Held-out evaluation in detail",
            paragraphs=prose(
                "intervals.txt.j2",
                n=len(cfg.seeds),
                rollouts=cfg.evaluation.rollouts,
                planted=first["audit_quality"].n,
                benign=first["false_positive"].n,
                notes=[f"{', '.join(names)}: {note}" for note, names in notes.items()],
            ),
            tables=[
                t.html()
                for t in (
                    _pooled(rows),
                    tables.per_seed(rows, cfg.seeds),
                    tables.signatures(rows),
                    tables.dimensions(rows),
                )
            ],
            figures=[
                FigureBlock(
                    bars,
                    "Bars and error bars: pooled mean and per-episode 95% bootstrap interval; black dots: "
                    "the per-seed means behind the headline table.",
                )
            ],
        ),  # fmt: skip
        Section(
            title="Training",
            paragraphs=[
                "Mean over seeds per step. The false-positive rate is measured on the benign groups of a batch, "
                "so it only exists for designs trained with calibration."
            ],
            figures=[
                FigureBlock(
                    training_curves(_curves(histories, "reward"), title="Training reward", vlines=vlines),
                    reward_caption(cfg, trained),
                ),
                _curve_figure(
                    _curves(histories, "claim_rate"),
                    "Share of audits that claim a finding",
                    "share",
                    "Share of all training audits (planted and benign) whose report claims a hidden behavior.",
                ),
                _curve_figure(
                    _curves(histories, "correct_rate"),
                    "Share of planted audits that identify the behavior",
                    "share",
                    "Share of planted training audits whose claim names a trigger topic.",
                ),
                _curve_figure(
                    _curves(histories, "accusations"),
                    "Accusations per audit",
                    "count",
                    "Auditor accusations per training audit.",
                ),
            ],
        ),  # fmt: skip
        strategy_section(clusters, groups, title="Strategies", convergence=convergence),
    ]


def terminal_tables(
    cfg: AuditWorldConfig, rows: Mapping[str, PolicyEvaluation], bases: Mapping[str, Base], ceiling: float
) -> list[tables.Table]:
    """What the job prints: the headline tables, the base's competence, and where audit quality comes from."""
    competence = competence_table(bases)
    return [
        *headline_tables(cfg, rows, ceiling),
        *([competence] if competence else []),
        tables.signatures(rows),
        tables.dimensions(rows),
    ]


def terminal_summary(
    cfg: AuditWorldConfig, rows: Mapping[str, PolicyEvaluation], bases: Mapping[str, Base], ceiling: float
) -> list[str]:
    return prose("headline.txt.j2", **headline_facts(cfg, rows, bases, ceiling))
