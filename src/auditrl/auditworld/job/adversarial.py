"""Targets that fight back: auditors co-trained with a target whose concealment adapts to them, against a control.

A `kind: auditworld_adversarial` config is an AuditWorld config plus an `adversary` section. Per training
seed and listed design, two auditors train from the job's base on the same schedule (`rounds` phases of
`auditor_steps`, each phase seeded alike) against the training families plus one more family that starts
at `start_family`'s rates:
- *fixed*: that family keeps its starting rates (the control: the same pool, schedule and budget);
- *co-trained*: after each auditor phase the family's concealment (auditrl.auditworld.adversary) trains for
  `target_steps` against the auditor as it then is, to lower its identification above the lift floor.
Every auditor, and the base both started from (the "before"), is then evaluated on the held-out behaviors
against three targets: the evaluation family as packaged (*fixed*, held out from both); the co-training
run's family at its end (*co-trained*: held out for the base and the fixed auditor, the sparring partner of
the co-trained one); and the evaluation family with its concealment trained against that very auditor,
frozen (*adapted*: does what the auditor learned survive a target that adapts to it?). The judges that
reward the auditors read only transcripts; the targets train on ground truth, as a red team does.
"""

from __future__ import annotations

import csv
import io
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field, field_validator, model_validator
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from auditrl.atomic import atomic_write_text
from auditrl.auditworld.adversary import (
    PARAMETERS,
    ConcealmentPolicy,
    TargetSettings,
    TargetStep,
    train_target,
    with_families,
)
from auditrl.auditworld.families import Family, check_family, target_family_names
from auditrl.auditworld.job.bases import BASE, Base, build_bases
from auditrl.auditworld.job.config import AuditWorldConfig, DesignRun
from auditrl.auditworld.job.report import prose
from auditrl.auditworld.job.run import build_world, run_directory
from auditrl.auditworld.job.tables import SHORT, Table, spread_cell
from auditrl.auditworld.metrics import (
    IDENTIFIED,
    EvalEpisodes,
    SeedSpread,
    across_seeds,
    evaluate_policy,
    paired_differences,
    t_interval,
)
from auditrl.auditworld.policies import MLPPolicy
from auditrl.auditworld.training import StepStats, train
from auditrl.auditworld.world import World
from auditrl.configfile import ConfigModel, read_yaml_mapping, validate_file
from auditrl.pages.html import FigureBlock, Section, write_page
from auditrl.pages.plots import training_curves
from auditrl.rundir import run_dir_lock

AUDITORS = ("base", "fixed", "co-trained")
"""The auditors compared per design: the base both started from, and the two trained from it."""
TARGETS = ("fixed", "co-trained", "adapted")
"""The targets each auditor is evaluated against (held-out behaviors)."""
MEASURED = (IDENTIFIED, "false_positive", "composite")
RESULTS_FILE = "adversarial.json"
TABLES_MD, TABLES_DIR = "tables.md", "tables"


class AdversaryConfig(ConfigModel):
    """The co-training schedule: which designs, how many phases of how many steps, and the target's training."""

    designs: list[str] = Field(
        min_length=1,
        description="Names of the job's `designs` to co-train under, each also trained as the control; the job runs "
        "only these.",
    )
    rounds: int = Field(default=4, ge=1, le=1000, description="Alternations of an auditor phase and a target phase.")
    auditor_steps: int = Field(default=15, ge=1, description="Auditor updates per phase.")
    target_steps: int = Field(default=10, ge=1, description="Target updates per phase.")
    start_family: str = Field(
        description="Packaged family whose rates and style the co-trained family starts from (and the control keeps)."
    )
    family_name: str = Field(
        default="cotrained",
        pattern=r"^[A-Za-z0-9_-]+$",
        description="Name of the co-trained family in the training pool (not a packaged family's).",
    )
    target: TargetSettings = Field(
        default_factory=TargetSettings, description="How the target's concealment trains (batch, step, lift floor)."
    )

    @field_validator("start_family")
    @classmethod
    def _known_family(cls, value: str) -> str:
        return check_family(value)

    @field_validator("family_name")
    @classmethod
    def _new_family(cls, value: str) -> str:
        if value in target_family_names():
            raise ValueError(f"{value!r} is a packaged family; the co-trained family needs a name of its own")
        return value


class AdversarialConfig(AuditWorldConfig):
    """The `kind: auditworld_adversarial` config file: an AuditWorld config and the co-training schedule."""

    kind: Literal["auditworld_adversarial"] = Field(  # type: ignore[assignment]  # narrows the base config's kind
        description="Selects the co-training job in `auditrl train`."
    )
    out_dir: Path = Field(
        default=Path("runs/auditworld_adversarial"), description="Run directory (overridden by `auditrl train --out`)."
    )
    adversary: AdversaryConfig = Field(description="The co-trained target and the alternation schedule.")

    @model_validator(mode="after")
    def _consistent(self) -> AdversarialConfig:
        known = [d.name for d in self.designs]
        unknown = [n for n in self.adversary.designs if n not in known]
        if unknown:
            raise ValueError(
                f"field 'adversary.designs': {unknown[0]!r} is not in `designs` (known: {', '.join(known)})"
            )
        if any(d.init is not None for d in self.designs if d.name in self.adversary.designs):
            raise ValueError(
                "field 'designs': a co-trained design starts from the job's base (`train.init`); drop its `init`"
            )
        steps = self.adversary.rounds * self.adversary.auditor_steps
        if "max_steps" in self.train.model_fields_set and self.train.max_steps != steps:
            raise ValueError(
                f"field 'train.max_steps': {self.train.max_steps} differs from adversary.rounds x "
                f"adversary.auditor_steps = {steps}, the steps every auditor of this job trains; leave it out or set "
                f"it to {steps}"
            )
        self.train.max_steps = steps
        return self


def load_adversarial_config(path: Path) -> AdversarialConfig:
    """Read and validate the YAML before anything runs; problems name the file and the field."""
    path = Path(path)
    return validate_file(AdversarialConfig, read_yaml_mapping(path), path)


@dataclass
class CoTrained:
    """One (design, seed): the two trained auditors, the co-trained family, and how each side moved in training."""

    fixed: MLPPolicy
    cotrained: MLPPolicy
    family: ConcealmentPolicy
    target_history: list[TargetStep] = field(default_factory=list)
    auditor_history: dict[str, list[StepStats]] = field(default_factory=dict)


def _phase_seed(seed: int, phase: int) -> int:
    return seed * 1000 + phase


def co_train(
    world: World,
    cfg: AdversarialConfig,
    design: DesignRun,
    seed: int,
    base: MLPPolicy,
    adapt: bool,
    tick: Callable[[int, str], None],
) -> tuple[MLPPolicy, ConcealmentPolicy, list[StepStats], list[TargetStep]]:
    """Alternate auditor phases (the job's `train`, from the auditor as it stands) with target phases (only when
    `adapt`); the auditor's batches draw from the training families and the extra family at its current rates."""
    adv = cfg.adversary
    target = ConcealmentPolicy.from_family(adv.family_name, world.family_models[adv.start_family])
    families = [*cfg.train_families, adv.family_name]
    rng = np.random.default_rng(_phase_seed(seed, 999))
    auditor: MLPPolicy = base
    auditor_history: list[StepStats] = []
    target_history: list[TargetStep] = []
    label = f"{design.name} seed {seed} {'co-trained' if adapt else 'fixed'}"
    for r in range(adv.rounds):
        phase = f"{label}: phase {r + 1}"

        def on_auditor(s: StepStats, p: str = phase) -> None:
            tick(1, p)

        def on_target(s: TargetStep, p: str = phase) -> None:
            tick(1, f"{p}, target lift {s.lift:.0f}")

        pool = with_families(world, {adv.family_name: target.family()})
        settings = cfg.train_config(design, _phase_seed(seed, r)).model_copy(
            update={"max_steps": adv.auditor_steps, "families": families}
        )
        result = train(pool, settings, cfg.judge, on_auditor, base=auditor)
        auditor = result.policy
        auditor_history += result.history
        if adapt:
            target, steps = train_target(
                world, auditor, target, adv.target, adv.target_steps, rng,
                on_target, first_step=len(target_history),
            )  # fmt: skip
            target_history += steps
    return auditor, target, auditor_history, target_history


def adapt_to(
    world: World, cfg: AdversarialConfig, auditor: MLPPolicy, seed: int, tick: Callable[[int, str], None], label: str
) -> tuple[ConcealmentPolicy, list[TargetStep]]:
    """The evaluation family with its concealment trained against this auditor, frozen, for as many target steps as
    co-training takes."""
    adv = cfg.adversary
    start = ConcealmentPolicy.from_family("adapted", world.family_models[cfg.evaluation.family])
    steps = adv.rounds * adv.target_steps
    return train_target(
        world, auditor, start, adv.target, steps, np.random.default_rng(_phase_seed(seed, 998)),
        lambda s: tick(1, f"{label}: adapting a target, lift {s.lift:.0f}"),
    )  # fmt: skip


def evaluate_against(
    world: World, cfg: AdversarialConfig, auditor: MLPPolicy, target: Family, seed: int
) -> EvalEpisodes:
    """The held-out suite against one target family (planted and benign of that family), the same draws per seed."""
    pool = with_families(world, {target.name: target})
    settings = cfg.evaluation.model_copy(update={"family": target.name})
    values, _, _ = evaluate_policy(pool, auditor, settings, np.random.default_rng(10_000 + seed), cfg.judge)
    return values


def _spread(values: Sequence[float], seeds: Sequence[int], bounds: tuple[float, float] = (0.0, 100.0)) -> SeedSpread:
    mean, sd, lo, hi = t_interval(values, bounds=bounds)
    return SeedSpread(seeds=list(seeds), per_seed=list(values), mean=mean, sd=sd, lo=lo, hi=hi, n=len(values))


@dataclass
class Outcome:
    """Everything the job measured, as seed spreads, per design."""

    seeds: list[int]
    evaluation: dict[str, dict[str, dict[str, dict[str, SeedSpread]]]] = field(default_factory=dict)
    """design -> auditor -> target -> metric."""
    trained_minus_base: dict[str, dict[str, dict[str, dict[str, SeedSpread]]]] = field(default_factory=dict)
    """design -> trained auditor -> target -> metric: per-seed differences with the base on the same target."""
    cotrained_minus_fixed: dict[str, dict[str, dict[str, SeedSpread]]] = field(default_factory=dict)
    """design -> target -> metric."""
    adaptation: dict[str, dict[str, dict[str, SeedSpread]]] = field(default_factory=dict)
    """design -> auditor -> metric: the adapted target minus the fixed one, for that auditor."""
    targets: dict[str, dict[str, SeedSpread]] = field(default_factory=dict)
    """design -> the co-trained family's start and end measures and end rates."""
    target_curves: dict[str, list[list[TargetStep]]] = field(default_factory=dict)
    auditor_curves: dict[str, dict[str, list[list[StepStats]]]] = field(default_factory=dict)
    adapted_lift: dict[str, dict[str, SeedSpread]] = field(default_factory=dict)


def _target_summary(runs: Sequence[CoTrained], seeds: Sequence[int], window: int) -> dict[str, SeedSpread]:
    """Start and end (mean of the first and last `window` target steps) of lift, confession rate and
    identification, and the end rates of the co-trained family."""
    out: dict[str, SeedSpread] = {}
    for name in ("lift", "confession_rate", "identified"):
        for part, pick in (("start", slice(0, window)), ("end", slice(-window, None))):
            values = [float(np.nanmean([getattr(s, name) for s in r.target_history[pick]])) for r in runs]
            out[f"{name} {part}"] = _spread(values, seeds)
    for p in PARAMETERS:
        out[f"rate {p}"] = _spread([r.family.rates()[p] for r in runs], seeds, bounds=(0.0, 2.0))
    return out


def run_adversarial(config_path: Path, out_dir: Path | None = None) -> Path:
    """Run the whole job, holding its run directory's lock; returns the run directory."""
    t0, cpu0 = time.perf_counter(), time.process_time()
    cfg = load_adversarial_config(Path(config_path))
    run_dir = run_directory(cfg, out_dir)
    console = Console()
    with run_dir_lock(run_dir, on_note=lambda note: console.print(note, highlight=False, soft_wrap=True)):
        outcome = _run(cfg, run_dir, console)
        runtime, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        _write(cfg, run_dir, outcome, runtime, cpu, console)
    return run_dir


def _run(cfg: AdversarialConfig, run_dir: Path, console: Console) -> Outcome:
    world = build_world(cfg)
    adv = cfg.adversary
    designs = [d for d in cfg.designs if d.name in adv.designs]
    bases = {BASE: Base(BASE, cfg.train.init)}
    outcome = Outcome(seeds=list(cfg.seeds))
    per_run = 2 * adv.rounds * adv.auditor_steps + 3 * adv.rounds * adv.target_steps
    total = len(cfg.seeds) * (len(designs) * per_run + adv.rounds * adv.target_steps)
    runs: dict[str, list[CoTrained]] = {d.name: [] for d in designs}
    parts: dict[tuple[str, str, str], list[EvalEpisodes]] = {}
    adapted_history: dict[tuple[str, str], list[list[TargetStep]]] = {}
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(), console=console,
    ) as progress:  # fmt: skip
        task = progress.add_task("bases", total=len(cfg.seeds), info="")
        build_bases(world, cfg, run_dir, bases, lambda b, seed: progress.update(task, advance=1, info=f"seed {seed}"))
        task = progress.add_task("co-training", total=total, info="")

        def tick(n: int, info: str) -> None:
            progress.update(task, advance=n, info=info)

        for seed in cfg.seeds:
            base = bases[BASE].policies[seed]
            fixed_target = world.family_models[cfg.evaluation.family]
            base_adapted, base_steps = adapt_to(world, cfg, base, seed, tick, f"base seed {seed}")
            for d in designs:
                fixed, _, fixed_history, _ = co_train(world, cfg, d, seed, base, False, tick)
                co, family, co_history, target_history = co_train(world, cfg, d, seed, base, True, tick)
                run = CoTrained(fixed, co, family, target_history, {"fixed": fixed_history, "co-trained": co_history})
                runs[d.name].append(run)
                auditors = {"base": base, "fixed": fixed, "co-trained": co}
                for name, auditor in auditors.items():
                    if name == "base":
                        adapted, steps = base_adapted, base_steps
                    else:
                        adapted, steps = adapt_to(world, cfg, auditor, seed, tick, f"{d.name} seed {seed} {name}")
                    adapted_history.setdefault((d.name, name), []).append(steps)
                    targets = {"fixed": fixed_target, "co-trained": family.family(), "adapted": adapted.family()}
                    for target_name, target in targets.items():
                        parts.setdefault((d.name, name, target_name), []).append(
                            evaluate_against(world, cfg, auditor, target, seed)
                        )
    seeds = list(cfg.seeds)
    window = max(1, adv.target_steps)
    for d in designs:
        n = d.name
        outcome.evaluation[n] = {
            a: {t: _headline(across_seeds(parts[(n, a, t)], seeds)) for t in TARGETS} for a in AUDITORS
        }
        outcome.trained_minus_base[n] = {
            a: {t: _headline(paired_differences(parts[(n, a, t)], parts[(n, "base", t)], seeds)) for t in TARGETS}
            for a in AUDITORS[1:]
        }
        outcome.cotrained_minus_fixed[n] = {
            t: _headline(paired_differences(parts[(n, "co-trained", t)], parts[(n, "fixed", t)], seeds))
            for t in TARGETS
        }
        outcome.adaptation[n] = {
            a: _headline(paired_differences(parts[(n, a, "adapted")], parts[(n, a, "fixed")], seeds)) for a in AUDITORS
        }
        outcome.targets[n] = _target_summary(runs[n], seeds, window)
        outcome.target_curves[n] = [r.target_history for r in runs[n]]
        outcome.auditor_curves[n] = {a: [r.auditor_history[a] for r in runs[n]] for a in AUDITORS[1:]}
        outcome.adapted_lift[n] = {
            a: _spread([float(np.mean([s.lift for s in h[-window:]])) for h in adapted_history[(n, a)]], seeds)
            for a in AUDITORS
        }
    return outcome


def _headline(spreads: Mapping[str, SeedSpread]) -> dict[str, SeedSpread]:
    return {m: spreads[m] for m in MEASURED}


# ---------------------------------------------------------------------------------------------------------------
# Tables, page and files


def evaluation_tables(cfg: AdversarialConfig, o: Outcome) -> list[Table]:
    """One table per target: every design's three auditors, and the trained ones' change from the base."""
    n = len(o.seeds)
    about = {
        "fixed": f"the evaluation family `{cfg.evaluation.family}` as packaged (held out from training)",
        "co-trained": "the co-training run's family at its end (held out for the base and the fixed auditor; the "
        "co-trained auditor's sparring partner)",
        "adapted": f"`{cfg.evaluation.family}` with its concealment trained against this very auditor, frozen",
    }
    tables = []
    for t in TARGETS:
        rows = []
        for d, by_auditor in o.evaluation.items():
            for a in AUDITORS:
                cells = [spread_cell(by_auditor[a][t][m]) for m in MEASURED]
                delta = o.trained_minus_base[d].get(a)
                diffs = (
                    [spread_cell(delta[t][m], signed=True) for m in (IDENTIFIED, "composite")] if delta else ["-"] * 2
                )
                rows.append([d, a, *cells, *diffs])
        tables.append(
            Table(
                title=f"Against the {t} target: mean ± 95% CI over {n} training seeds",
                header=["design", "auditor", *[SHORT[m] for m in MEASURED], "Δ ident.", "Δ composite"],
                rows=rows,
                caption=f"Target: {about[t]}. Δ = trained minus base on this target (per-seed differences). Held-out "
                "behaviors; ident. % = planted audits whose claim names a trigger topic.",
            )
        )
    return tables


def transfer_table(o: Outcome) -> Table:
    """Each auditor on the targets it did not train against, and the co-trained minus fixed difference."""
    rows = []
    for d, ev in o.evaluation.items():
        diff = o.cotrained_minus_fixed[d]
        rows.append([
            d,
            spread_cell(ev["fixed"]["co-trained"][IDENTIFIED]), spread_cell(ev["co-trained"]["co-trained"][IDENTIFIED]),
            spread_cell(diff["co-trained"][IDENTIFIED], signed=True),
            spread_cell(ev["co-trained"]["fixed"][IDENTIFIED]), spread_cell(ev["fixed"]["fixed"][IDENTIFIED]),
            spread_cell(diff["fixed"][IDENTIFIED], signed=True),
            spread_cell(diff["fixed"]["composite"], signed=True),
        ])  # fmt: skip
    return Table(
        title="Transfer (identification %, mean ± 95% CI over seeds)",
        header=["design", "fixed→co-tr.", "co-tr.→co-tr.", "Δ", "co-tr.→fixed", "fixed→fixed", "Δ", "Δ composite"],
        rows=rows,
        caption="auditor→target. fixed→co-tr.: the auditor trained against fixed targets on the held-out co-trained "
        "family; co-tr.→fixed: the reverse, the co-trained auditor on the held-out fixed family. Δ = co-trained minus "
        "fixed auditor on the same target (paired by seed); Δ composite on the fixed target.",
    )


def cotraining_table(o: Outcome) -> Table:
    """Co-trained minus fixed auditor on every target and metric: what co-training changed."""
    rows = [[d, t, *[spread_cell(o.cotrained_minus_fixed[d][t][m], signed=True) for m in MEASURED]]
            for d in o.evaluation for t in TARGETS]  # fmt: skip
    return Table(
        title="Co-trained minus fixed auditor (mean ± 95% CI of the per-seed differences)",
        header=["design", "target", *[SHORT[m] for m in MEASURED]],
        rows=rows,
        caption="Both auditors trained from the same base on the same schedule and seeds; only the extra family's "
        "concealment adapted for the co-trained one.",
    )


def adaptation_table(o: Outcome) -> Table:
    """How much identification each auditor loses to a target adapted against it, and what lift that target kept."""
    rows = [
        [d, a, *[spread_cell(o.evaluation[d][a][t][IDENTIFIED]) for t in ("fixed", "adapted")],
         spread_cell(o.adaptation[d][a][IDENTIFIED], signed=True), spread_cell(o.adapted_lift[d][a])]
        for d in o.evaluation for a in AUDITORS
    ]  # fmt: skip
    return Table(
        title="A target that adapts to the auditor",
        header=["design", "auditor", "ident. fixed", "ident. adapted", "Δ", "adapted lift"],
        rows=rows,
        caption="The evaluation family before and after its concealment trained against the auditor (frozen); Δ = "
        "adapted minus fixed (paired by seed); adapted lift = the adapted target's lift over its last phase (points).",
    )


def target_table(cfg: AdversarialConfig, o: Outcome) -> Table:
    """The co-trained family: lift, confessions and identification at the start and end, and its end rates."""
    keys = [f"{m} {p}" for m in ("lift", "confession_rate", "identified") for p in ("start", "end")]
    rows = [[d, *[spread_cell(s[k]) for k in keys], *[f"{s[f'rate {p}'].mean:.2f}" for p in PARAMETERS]]
            for d, s in o.targets.items()]  # fmt: skip
    return Table(
        title="The co-trained family over training (mean ± 95% CI over seeds)",
        header=[
            "design",
            "lift start",
            "lift end",
            "conf. start",
            "conf. end",
            "ident. start",
            "ident. end",
            *PARAMETERS,
        ],  # fmt: skip
        rows=rows,
        caption=f"Start/end = the first/last {cfg.adversary.target_steps} target steps. Lift: points of a natural "
        f"user's trigger-context messages that display the behavior (floor {cfg.adversary.target.lift_floor:g}); "
        "conf. = % of training audits in which it truly confessed; ident. = % its auditor identified; then its end "
        f"rates (start: `{cfg.adversary.start_family}`'s).",
    )


def all_tables(cfg: AdversarialConfig, o: Outcome) -> list[Table]:
    return [
        *evaluation_tables(cfg, o),
        transfer_table(o),
        cotraining_table(o),
        adaptation_table(o),
        target_table(cfg, o),
    ]


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")[:60]


def markdown(tables: Sequence[Table]) -> str:
    cell = lambda c: c.replace("|", "\\|").replace("\n", " ")
    out = []
    for t in tables:
        out += [f"### {cell(t.title)}", "", "| " + " | ".join(cell(h) for h in t.header) + " |",
                "|" + "|".join(["---"] + ["---:"] * (len(t.header) - 1)) + "|"]  # fmt: skip
        out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in t.rows]
        out += ["", cell(t.caption), ""]
    return "\n".join(out)


def csv_text(t: Table) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(t.header)
    writer.writerows(t.rows)
    return buf.getvalue()


def _curve(runs: Sequence[Sequence[Any]], name: str, scale: float = 1.0) -> tuple[list[int], list[float]]:
    values = np.array([[scale * float(getattr(s, name)) for s in h] for h in runs], dtype=np.float64)
    return list(range(values.shape[1])), np.nanmean(values, axis=0).tolist()


def figures(cfg: AdversarialConfig, o: Outcome) -> list[FigureBlock]:
    adv = cfg.adversary
    rounds = [adv.target_steps * r for r in range(1, adv.rounds)]
    out = []
    for name, title, ylabel, what in (
        ("lift", "Co-trained family: lift", "points", "Lift of the co-trained family's behavior to a natural user "
         f"(points; floor {adv.target.lift_floor:g}) per target step, mean over seeds."),
        ("confession_rate", "Co-trained family: confession rate", "% of audits", "Share of the target's training "
         "audits in which it truly confessed, per target step, mean over seeds."),
        ("identified", "Co-trained family: identification by its auditor", "% of audits", "Share of the target's "
         "training audits whose claim named a trigger topic, per target step, mean over seeds."),
    ):  # fmt: skip
        curves = {d: _curve(runs, name) for d, runs in o.target_curves.items()}
        plot = training_curves(curves, title=title, xlabel="target step", ylabel=ylabel, vlines=rounds)
        out.append(FigureBlock(plot, what + " Dotted: an auditor phase ran between."))
    auditor = {
        f"{d} {a}": _curve(runs, "correct_rate", 100.0) for d, by in o.auditor_curves.items() for a, runs in by.items()
    }
    out.append(FigureBlock(
        training_curves(auditor, title="Auditors: identification in training", xlabel="auditor step",
                        ylabel="% of planted audits", vlines=[adv.auditor_steps * r for r in range(1, adv.rounds)]),
        "Share of planted training audits (all training families) whose claim named a trigger topic, mean over seeds; "
        "the co-trained auditor's pool holds the co-trained family as it stood in each phase, the fixed auditor's "
        "the same family at its starting rates.",
    ))  # fmt: skip
    return out


def _facts(cfg: AdversarialConfig, o: Outcome) -> dict[str, Any]:
    """What the summary paragraphs state, from this run's numbers only."""

    def beyond(s: SeedSpread, sign: int) -> bool:
        return s.lo is not None and s.hi is not None and (s.lo > 0 if sign > 0 else s.hi < 0)

    rows = []
    for d in o.evaluation:
        rows.append({
            "design": d,
            "targets": {k: v.mean for k, v in o.targets[d].items()},
            "adapt": {a: o.adaptation[d][a][IDENTIFIED] for a in AUDITORS},
            "adapt_down": [a for a in AUDITORS if beyond(o.adaptation[d][a][IDENTIFIED], -1)],
            "transfer": o.cotrained_minus_fixed[d],
            "co_better": [t for t in TARGETS if beyond(o.cotrained_minus_fixed[d][t][IDENTIFIED], 1)],
            "co_worse": [t for t in TARGETS if beyond(o.cotrained_minus_fixed[d][t][IDENTIFIED], -1)],
        })  # fmt: skip
    return {"rows": rows, "adv": cfg.adversary, "n": len(o.seeds), "evaluation": cfg.evaluation.family,
            "identified": IDENTIFIED}  # fmt: skip


def _json(o: Outcome) -> dict[str, Any]:
    dump = lambda tree: json.loads(json.dumps(tree, default=lambda x: x.model_dump()))
    nan_free = lambda v: None if isinstance(v, float) and not np.isfinite(v) else v
    return {
        "evaluation": dump(o.evaluation),
        "trained_minus_base": dump(o.trained_minus_base),
        "cotrained_minus_fixed": dump(o.cotrained_minus_fixed),
        "adaptation": dump(o.adaptation),
        "adapted_lift": dump(o.adapted_lift),
        "targets": dump(o.targets),
        "target_curves": {d: [[{k: nan_free(v) for k, v in asdict(s).items()} for s in h] for h in runs]
                          for d, runs in o.target_curves.items()},
        "auditor_curves": {d: {a: [[nan_free(s.correct_rate) for s in h] for h in runs] for a, runs in by.items()}
                           for d, by in o.auditor_curves.items()},
    }  # fmt: skip


def _write(cfg: AdversarialConfig, run_dir: Path, o: Outcome, runtime: float, cpu: float, console: Console) -> None:
    tables = all_tables(cfg, o)
    for t in tables:
        console.print(t.terminal())
    summary = prose("adversarial.txt.j2", **_facts(cfg, o))
    for paragraph in summary:
        console.print(paragraph, highlight=False, soft_wrap=False, markup=False)
    capability = torch.backends.cpu.get_cpu_capability()
    results = {"kind": "auditworld_adversarial", "config": json.loads(cfg.model_dump_json()), "seeds": o.seeds,
               **_json(o), "runtime_seconds": runtime, "cpu_seconds": cpu, "cpu_capability": capability}  # fmt: skip
    atomic_write_text(run_dir / RESULTS_FILE, json.dumps(results, indent=2, allow_nan=False))
    atomic_write_text(run_dir / TABLES_MD, markdown(tables))
    (run_dir / TABLES_DIR).mkdir(exist_ok=True)
    for i, t in enumerate(tables):
        atomic_write_text(run_dir / TABLES_DIR / f"{i + 1:02d}_{_slug(t.title)}.csv", csv_text(t))
    setup = (
        f"{len(o.seeds)} training seeds; per design, each auditor trained {cfg.adversary.rounds} phases of "
        f"{cfg.adversary.auditor_steps} steps ({cfg.train.groups_per_step} groups of {cfg.train.group_size}, "
        f"{cfg.train.max_turns} turns), the co-trained family {cfg.adversary.target_steps} target steps after each "
        f"({cfg.adversary.target.episodes_per_step} audits per step); evaluation: held-out behaviors, "
        f"{cfg.evaluation.rollouts} rollouts per seed scenario. {runtime:.0f} s wall, {cpu:.0f} CPU s "
        f"(CPU capability {capability})."
    )
    sections = [
        Section(title="What this run shows and does not", paragraphs=summary),
        Section(title="Evaluation", tables=[t.html() for t in tables[:3]]),
        Section(title="Transfer, co-training and adaptation", tables=[t.html() for t in tables[3:6]]),
        Section(title="The co-trained target", tables=[tables[6].html()], figures=figures(cfg, o)),
        Section(title="Setup", paragraphs=[setup]),
    ]
    page = write_page(run_dir / "report.html", f"AuditWorld, co-trained targets: {cfg.name}", sections)
    console.print(f"{runtime:.0f} s wall, {cpu:.0f} CPU s (CPU capability {capability}); page: {page}", markup=False)
