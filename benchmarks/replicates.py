"""A trained auditor's change from its start across replicate runs of report_learning (its `--seed`), read from each
run's record: every run's change with its interval over audits, their mean, and the spread between runs.

Replicates audit the same held-out audits, so a run's interval holds the audits' sampling alone; the spread between runs
holds the training's own randomness (the rows drawn and their order, the sampling; with the reset, also each run's reset
audits, drawn from the rows it did not train on) and says whether a gain repeats. The interval over runs is Student's t
on the runs' means: with three runs it is wide, and it is the honest one.

    python benchmarks/replicates.py --run RUN_A --run RUN_B --run RUN_C [--view reset] \
        [--auditor "SFT + choice gradient"]
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import mean, stdev
from typing import Annotated, Any

import typer
from report_learning import CHOICE_GRADIENT, RANKING, cell
from rich.console import Console
from rich.table import Table
from scipy.stats import t as student_t

from auditrl.experiments.small_lm.report_audits import HELD_OUT_PARTS

console = Console()
VIEWS = ("reset", "matched", "start verdict reset", "start verdict")
"""report_learning's paired comparisons of a trained auditor with its start (the exact evaluation's plain change sits
under `exact`, keyed by pair, and is not read here)."""
METRICS = ("discrimination (planted - benign)", RANKING, "identification (planted)", "FP calibration (benign)",
           "claim rate, planted", "claim rate, benign")  # fmt: skip
RECORD = "report_learning.json"


def load_record(run: Path) -> dict[str, Any]:
    file = run / RECORD
    if not file.is_file():
        raise typer.BadParameter(
            f"{file}: no report_learning record (run benchmarks/report_learning.py --out {run})", param_hint="--run"
        )
    return json.loads(file.read_text())


def run_label(run: Path, record: dict[str, Any], auditor: str) -> str:
    """The run's folder and the seed the auditor's training ran under (the choice gradient records its own; GRPO runs
    record report_learning's --seed, None for their configs')."""
    seed = (
        record["choice_gradient"]["settings"]["seed"]
        if auditor == CHOICE_GRADIENT and record.get("choice_gradient")
        else record.get("grpo_seed")
    )
    return f"{run.name} (seed {seed})" if seed is not None else run.name


def changes(record: dict[str, Any], run: Path, part: str, view: str, auditor: str) -> dict[str, dict[str, float]]:
    """One run's paired change of every metric in one held-out part."""
    found = record.get("summaries", {}).get(part, {}).get(view, {}).get(auditor)
    if found is None:
        raise typer.BadParameter(
            f"{run / RECORD}: no {view!r} comparison of {auditor!r} in {part!r} (report_learning prints it "
            "when that auditor and its start were both evaluated exactly)",
            param_hint="--run",
        )
    return found["change"]


def over_runs(means: list[float], level: float = 0.95) -> dict[str, float]:
    """Mean of the runs' changes with Student's t interval over runs (none from one run)."""
    centre = mean(means)
    if len(means) < 2:
        return {"mean": centre, "lo": float("nan"), "hi": float("nan"), "n": len(means)}
    half = float(student_t.ppf(0.5 + level / 2, len(means) - 1)) * stdev(means) / len(means) ** 0.5
    return {"mean": centre, "lo": centre - half, "hi": centre + half, "n": len(means)}


def training_table(labels: list[str], records: list[dict[str, Any]], caption: str) -> Table | None:
    """The choice gradient's expected reward on planted training audits, at the start and in the last third of steps."""
    table = Table(title=f"{CHOICE_GRADIENT}: expected reward on planted training audits, per run", caption=caption)
    for column in (
        "run",
        "trained audits, planted / benign",
        "start",
        "last third of the steps",
        "benign KL to start, last third",
    ):
        table.add_column(column, justify="left" if column == "run" else "right")
    for label, record in zip(labels, records, strict=True):
        gradient = record.get("choice_gradient")
        if not gradient:
            continue
        steps = gradient["expected reward by step"]
        last = steps[2 * len(steps) // 3 :]
        read = lambda key: [s[key] for s in last if s.get(key) is not None]  # noqa: B023 - called in this iteration only
        fmt = lambda values: f"{mean(values):.3f}" if values else "-"  # no audit of that kind trained
        trained, start = gradient["trained audits"], gradient["start's expected reward"]["planted"]
        table.add_row(label, f"{trained['planted']} / {trained['benign']}", fmt([] if start is None else [start]),
                      fmt(read("planted")), fmt(read("benign KL to start")))  # fmt: skip
    return table if table.row_count else None


def main(
    run: Annotated[list[Path], typer.Option(help="A report_learning output folder; give one per replicate.")],
    view: Annotated[str, typer.Option(help=f"Which paired comparison to read: {', '.join(VIEWS)}.")] = "reset",
    auditor: Annotated[
        str, typer.Option(help="The trained auditor whose change from its start is read.")
    ] = CHOICE_GRADIENT,
    save: Annotated[Path | None, typer.Option(help="Also write the tables' figures to this JSON file.")] = None,
) -> None:
    if view not in VIEWS:
        raise typer.BadParameter(
            f"{view!r} is no comparison report_learning records; choose from {', '.join(VIEWS)}", param_hint="--view"
        )
    records = [load_record(r) for r in run]
    labels = [run_label(r, rec, auditor) for r, rec in zip(run, records, strict=True)]
    caption = "; ".join(sorted({rec.get("cpu", "CPU not recorded") for rec in records}))
    if auditor == CHOICE_GRADIENT and (table := training_table(labels, records, caption)):
        console.print(table)
    summary: dict[str, Any] = {"view": view, "auditor": auditor, "runs": labels}
    for part in HELD_OUT_PARTS:
        per_run = [changes(rec, r, part, view, auditor) for r, rec in zip(run, records, strict=True)]
        table = Table(
            title=f"{part}: {auditor} minus its start ({view}), % mean [95% CI] over audits per run; "
            "over runs, Student's t",
            caption=caption,
        )
        for column in ("metric", *labels, f"mean of {len(run)} runs [95% CI over runs]", "runs above 0 / below 0"):
            table.add_column(column, justify="left" if column == "metric" else "right")
        summary[part] = {}
        for metric in METRICS:
            cells = [c.get(metric) for c in per_run]
            if any(c is None for c in cells):
                continue
            pooled = over_runs([c["mean"] for c in cells])
            above, below = sum(c["lo"] > 0 for c in cells), sum(c["hi"] < 0 for c in cells)
            summary[part][metric] = {"runs": cells, "over runs": pooled, "above 0": above, "below 0": below}
            shown = cell(pooled, signed=True) if pooled["n"] > 1 else f"{pooled['mean']:+.1f}"
            table.add_row(metric, *(cell(c, signed=True) for c in cells), shown, f"{above} / {below}")
        console.print(table)
    if save is not None:
        save.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    typer.run(main)
