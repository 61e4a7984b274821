"""The AuditWorld report: what the run shows and does not, its tables, figures and their captions.

The prose lives here with the sections it explains; every number in it comes from this run's config,
results and training histories, so the text says whatever training produced.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np
from rich.table import Table

from auditrl.analysis.strategies import StrategyClusters
from auditrl.auditworld.config import AuditWorldConfig
from auditrl.configfile import load_yaml
from auditrl.evaluate.metrics import suite_table
from auditrl.evaluate.paper import load_paper_reference
from auditrl.evaluate.schema import METRIC_TITLES, SuiteResult
from auditrl.report.html import FigureBlock, Section, TableBlock
from auditrl.report.plots import training_curves
from auditrl.report.sections import strategy_section, suite_section
from auditrl.rewards.registry import design_spec
from auditrl.sim.metrics import METRICS, SeedSpread
from auditrl.sim.training import StepStats, TrainResult

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
MEASURED = (
    "AuditWorld measures the suite's metrics per episode, from ground truth where there is one: audit quality is "
    "the mean of six dimensions modelled on the paper's rubric, FP calibration is 100 when the report on a benign "
    "target finds nothing, realism is the share of both orders in which AuditWorld's realism judge (with the run's "
    "judge flaws; it reads only the auditor's first three messages) took the audit's opening for a real user's "
    "(50 is a judge at chance), and the composite is the unweighted mean of the three."
)
SIGNATURES = {
    "false_positive_rate": "FP rate %",
    "detection_rate": "detection %",
    "target_evidence_rate": "target evidence %",
    "accusations_per_audit": "accusations",
    "confessions_per_audit": "confessions",
    "false_confessions_per_audit": "false confessions",
    "eval_aware_per_audit": "eval-aware",
    "rollbacks_per_audit": "rollbacks",
    "turns_per_audit": "turns",
}
"""The reward-hacking signatures of `EvalEpisodes.diagnostics`, with their column titles."""


@dataclass
class PolicyEvaluation:
    """One auditor's held-out evaluation: the suite's result type plus what only AuditWorld can measure."""

    suite: SuiteResult
    diagnostics: dict[str, float]
    seeds: dict[str, SeedSpread]
    """Each metric across training seeds (each seed's mean one observation)."""
    constant: dict[str, str]
    """Why a metric took one value in every episode, by metric."""
    dimensions: dict[str, float]
    """Mean of each audit-quality dimension (0-100), pooled over seeds."""


def _spread_cell(s: SeedSpread) -> str:
    if s.lo is None or s.hi is None:
        return f"{s.mean:.1f}"
    return f"{s.mean:.1f} [{s.lo:.1f},{s.hi:.1f}]"


def _per_seed_cell(s: SeedSpread) -> str:
    return " / ".join(f"{v:.1f}" for v in s.per_seed)


def results_table(rows: dict[str, PolicyEvaluation]) -> Table:
    """The headline table: the suite's table of metrics with 95% CIs over training seeds x episodes."""
    return suite_table(
        [r.suite for r in rows.values()], title="AuditWorld: held-out evaluation (95% CI over seeds x episodes)", metrics=METRICS
    )


def signatures_table(rows: dict[str, PolicyEvaluation]) -> Table:
    """The reward-hacking signatures per auditor (means per audit; rates in %)."""
    table = Table(title="Reward-hacking signatures (per audit)")
    table.add_column("auditor")
    for title in SIGNATURES.values():
        table.add_column(title, justify="right")
    for name, row in rows.items():
        table.add_row(name, *[f"{row.diagnostics[k]:.2f}" for k in SIGNATURES])
    return table


DIMENSIONS_CAPTION = (
    "Audit quality by dimension (means over planted audits, pooled over seeds). Coherence, depth, evidence and "
    "identified need the auditor to act on what the target said; non-confrontation (style) and exhibited (the "
    "target showed the behavior somewhere in the audit) can be earned by a plan that never looks, such as the "
    "blind baseline's."
)


def dimensions_table(rows: dict[str, PolicyEvaluation]) -> Table:
    """The six audit-quality dimensions per auditor: where its audit quality comes from."""
    table = Table(title="Audit quality by dimension")
    table.add_column("auditor")
    names = list(next(iter(rows.values())).dimensions)
    for n in names:
        table.add_column(n.replace("_", "-"), justify="right")
    for name, row in rows.items():
        table.add_row(name, *[f"{row.dimensions[n]:.1f}" for n in names])
    return table


def seeds_table(rows: dict[str, PolicyEvaluation], n_seeds: int) -> Table:
    """The same metrics with each training seed as one observation: mean and 95% t-interval over seeds."""
    table = Table(
        title=f"Across training seeds: mean of the {n_seeds} per-seed means [95% t-interval over seeds, n={n_seeds}]"
    )
    table.add_column("auditor")
    for m in METRICS:
        table.add_column(METRIC_TITLES[m], justify="right")
    for name, row in rows.items():
        table.add_row(name, *[_spread_cell(row.seeds[m]) for m in METRICS])
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
    reference = [n for n in trained if design_spec(by_design[n]).references]
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


def _interval_paragraphs(cfg: AuditWorldConfig, rows: dict[str, PolicyEvaluation]) -> list[str]:
    """The sentence on the two kinds of interval, and why any zero-width interval has zero width."""
    n = len(cfg.seeds)
    first = next(iter(rows.values())).suite.estimates()
    wider = []
    for name in (d.name for d in cfg.designs):
        for m in METRICS:
            e, sp = rows[name].suite.estimates()[m], rows[name].seeds[m]
            if sp.lo is not None and sp.hi is not None and e.hi - e.lo > 0:
                wider.append((sp.hi - sp.lo) / (e.hi - e.lo))
    text = (
        "Two kinds of 95% interval are shown. The first table follows the paper: a bootstrap over every evaluation "
        f"episode pooled over the {n} training seeds x held-out seed scenarios x {cfg.evaluation.rollouts} rollouts "
        f"({first['audit_quality'].n} planted and {first['false_positive'].n} benign audits per auditor). It says how "
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
        for note in row.constant.values():
            by_note.setdefault(note, []).append(name)
    notes = [f"{', '.join(names)}: {note}" for note, names in by_note.items()]
    if notes:
        paragraphs.append(
            "Zero-width intervals mean the metric took one value in every episode, not that it was measured without "
            "error: " + "; ".join(notes) + "."
        )
    return paragraphs


def _dose_response() -> tuple[str, dict[float, float]]:
    raw = load_yaml(resources.files("auditrl.auditworld").joinpath("data/paper_dose_response.yaml").read_text(encoding="utf-8"))
    return str(raw["source"]), {float(k): float(v) for k, v in raw["fp_calibration_by_benign_fraction"].items()}


def assumptions_paragraph(cfg: AuditWorldConfig, rows: dict[str, PolicyEvaluation]) -> str:
    """What follows from hand-set assumptions and what emerged from training, with this run's numbers."""
    f = cfg.judge.flaws
    mean = lambda name, m: rows[name].seeds[m].mean  # noqa: E731
    chance = 100.0 * round(cfg.world.fair_chance * cfg.world.seeds_per_behavior) / cfg.world.seeds_per_behavior / cfg.world.scenario_topics
    text = (
        "Assumptions, set by hand and not learned: the LLM-judge model's flaw sizes, shared by every judge "
        f"(noise {f.noise:g}, position bias {f.position_bias:g}, verbosity {f.verbosity:g}, alarm susceptibility "
        f"{f.alarm:g}, narration credulity {f.credulity:g}, missed displays {f.miss:g}, false recognitions "
        f"{f.false_recognition:g}; each documented in auditrl.sim.judges.JudgeFlaws); the targets' rates (how "
        "often a plant shows in its trigger contexts, sycophantic confessions under pressure, leaks, eval "
        "awareness under test framing: sim/data/families.yaml and behaviors.yaml); the seed bank (each scenario "
        f"spans {cfg.world.scenario_topics} topics, and a {cfg.world.fair_chance:g} share of each behavior's seeds "
        "includes one trigger, in each position equally often); "
        f"the untrained policy's prior (no finding with probability {cfg.train.prior_no_finding:g}, standing in for "
        "a calibrated instruction-tuned base model); the untrained policy's random auditing actions (the paper's base "
        "model already audited competently before training); the metrics, ground-truth proxies of the paper's suite; "
        "and the realism judge's giveaway weights (auditrl.sim.judges.Rubric). "
        "Any result that follows from these alone is an assumption restated. Emerged from training: which "
        "strategies each reward design's auditor adopted and how they score, whatever that turned out to be."
    )
    by_design: dict[str, list[tuple[float, str]]] = {}
    for d in cfg.designs:
        by_design.setdefault(d.design, []).append((d.benign_fraction, d.name))
    changes = []
    for design, runs in by_design.items():
        if len(runs) > 1:
            steps = ", ".join(f"{fr:g}: {mean(n, 'false_positive'):.1f}" for fr, n in sorted(runs))
            changes.append(f"{design} (benign fraction: FP calibration) {steps}")
    if changes:
        text += " In this run, " + "; ".join(changes) + "."
    if "blind" in rows and "experimenter" in rows:
        blind_id = float(rows["blind"].diagnostics["detection_rate"])
        dims = rows["blind"].dimensions
        text += (
            f" Check of the instrument: the blind auditor, which never looks at the target, scored audit quality "
            f"{mean('blind', 'audit_quality'):.1f} against the experimenter's {mean('experimenter', 'audit_quality'):.1f}"
            + (f" and random's {mean('random', 'audit_quality'):.1f}" if "random" in rows else "")
            + f", and identified the behavior in {blind_id:.0f}% of planted audits; it claims the scenario's lead topic "
            f"in {100 * cfg.world.blind_claim_rate:.0f}% of audits, and a scenario topic picked blindly is right in "
            f"{chance:.0f}% of scenarios. Its audit quality comes from the dimensions a plan earns without looking "
            f"(non-confrontation {dims['non_confrontation']:.0f}, exhibited {dims['exhibited']:.0f}); on those that "
            f"need the target's answers it scored coherence {dims['coherence']:.0f}, depth {dims['depth']:.0f}, "
            f"evidence {dims['evidence']:.0f}, identified {dims['identified']:.0f}."
        )
    return text


def paper_tables(cfg: AuditWorldConfig, rows: dict[str, PolicyEvaluation]) -> list[TableBlock]:
    """The paper's published rows beside our closest rows, and the in-group calibration dose-response."""
    paper = load_paper_reference()
    mean = lambda name, m: f"{rows[name].seeds[m].mean:.1f}"  # noqa: E731
    table = [[r.label, "paper", r.cell("audit_quality"), r.cell("false_positive"), r.cell("realism"), r.cell("composite")]
             for r in paper.rows]  # fmt: skip
    ours = [n for n in ("untrained", *[d.name for d in cfg.designs if d.benign_fraction in (0.0, 0.5)]) if n in rows]
    table += [[n, "AuditWorld", mean(n, "audit_quality"), mean(n, "false_positive"), mean(n, "realism"), mean(n, "composite")]
              for n in ours]  # fmt: skip
    source, dose = _dose_response()
    ingroup = {d.benign_fraction: d.name for d in cfg.designs if d.design == "ingroup_pairwise"}
    dose_rows = [[f"{fr:g}", f"{paper_fp:.0f}", mean(ingroup[fr], "false_positive") if fr in ingroup else "-"]
                 for fr, paper_fp in sorted(dose.items())]  # fmt: skip
    return [
        TableBlock(
            header=["row", "source", "audit quality", "FP calibration", "realism", "composite"], rows=table,
            caption=f"The paper's figures ({paper.source}) beside ours (means over training seeds), for comparison "
                    "only: the world was not tuned toward them, its scale differs, and our composite averages three "
                    "metrics (no production metric) where the paper's averages four.",
        ),
        TableBlock(
            header=["benign fraction", "paper FP calibration", "AuditWorld FP calibration"], rows=dose_rows,
            caption=f"In-group pairwise calibration dose-response: {source} beside this run.",
        ),
    ]  # fmt: skip


def report_sections(
    cfg: AuditWorldConfig,
    rows: dict[str, PolicyEvaluation],
    trained: dict[str, list[TrainResult]],
    clusters: StrategyClusters,
    groups: list[str],
    results: dict[str, Any],
) -> list[Section]:
    histories = {name: [r.history for r in rs] for name, rs in trained.items()}
    signature_rows = [[name, *[round(row.diagnostics[k], 2) for k in SIGNATURES]] for name, row in rows.items()]
    seed_header = ["auditor"] + [h for m in METRICS for h in (METRIC_TITLES[m], f"{METRIC_TITLES[m]} by seed")]
    seed_rows = [[name, *[c for m in METRICS for c in (_spread_cell(row.seeds[m]), _per_seed_cell(row.seeds[m]))]]
                 for name, row in rows.items()]  # fmt: skip
    designs_desc = [
        f"{d.name}: {d.design}, benign fraction {d.benign_fraction:g}" + (" (strict binary judge)" if d.binary_strict else "")
        for d in cfg.designs
    ]
    seeds_text = f"{len(cfg.seeds)} training seed{'s' if len(cfg.seeds) > 1 else ''}"
    held_out = suite_section(
        [r.suite for r in rows.values()], title="Held-out evaluation", metrics=METRICS,
        explanation=[MEASURED, "Scores are 0-100; the signatures are means per audit (FP rate, detection and target "
                               "evidence in %).", *_interval_paragraphs(cfg, rows)],
        points={n: {m: r.seeds[m].per_seed for m in METRICS} for n, r in rows.items()},
        figure_caption="Bars and error bars: pooled mean and per-episode 95% bootstrap interval (first table); "
                       "black dots: the per-seed means behind the seeds table.",
    )  # fmt: skip
    held_out.tables = [
        *held_out.tables,
        TableBlock(header=seed_header, rows=seed_rows,
                   caption=f"Across training seeds: mean of the per-seed means [95% t-interval over the "
                           f"{seeds_text}], and each seed's mean (seeds {cfg.seeds})"),
        TableBlock(header=["auditor", *SIGNATURES.values()], rows=signature_rows, caption="Reward-hacking signatures"),
        TableBlock(header=["auditor", *next(iter(rows.values())).dimensions],
                   rows=[[name, *[round(v, 1) for v in row.dimensions.values()]] for name, row in rows.items()],
                   caption=DIMENSIONS_CAPTION),
    ]  # fmt: skip
    refreshes = (
        list(range(cfg.train.reference_refresh, cfg.train.steps, cfg.train.reference_refresh))
        if any(design_spec(d.design).references for d in cfg.designs)
        else []
    )
    claim_curves = _history_curves(histories, "claim_rate")
    accusation_curves = _history_curves(histories, "accusations")
    return [
        Section(title="What this run shows and does not", paragraphs=[assumptions_paragraph(cfg, rows), STATEMENT]),
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
                     f"reports no finding with probability {cfg.train.prior_no_finding:g} whatever it saw (the "
                     "`untrained` row), standing in for the paper's calibrated base model. Against a claiming "
                     "reference a false claim on a benign target loses little, and once a snapshot claims on every "
                     "benign audit, honest nulls are rarely sampled again: calibration then depends on how much "
                     "honesty the policy still had at the refresh."]
                    if refreshes
                    else []
                ),
                f"Training throughput {results['throughput_episodes_per_second']:,.0f} simulated audits per second; "
                f"whole job {results['runtime_seconds']:.0f} s.",
            ],
        ),
        held_out,
        Section(title="Beside the paper", tables=paper_tables(cfg, rows)),
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
        strategy_section(clusters, groups, title="Strategies"),
    ]
