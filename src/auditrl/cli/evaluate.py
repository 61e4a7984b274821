"""`auditrl evaluate RUN`: the held-out suite over stored, judged transcripts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console

from auditrl.atomic import atomic_write_text
from auditrl.evaluate.groups import group_transcripts
from auditrl.evaluate.suite import (
    SuiteDataError,
    compute_suite,
    load_paper_reference,
    results_json,
    seed_unit,
    suite_table,
    transcript_unit,
)
from auditrl.report.html import write_report
from auditrl.report.sections import suite_section
from auditrl.scaffold.store import RunError, load_transcripts


def evaluate(
    run: Annotated[Path, typer.Argument(help="A transcripts.jsonl file, or a run directory holding transcripts*.jsonl.")],
    by: Annotated[str, typer.Option(help="Group rows by: auditor, target, target_family, behavior, or a metadata key.")] = "auditor",
    unit: Annotated[Literal["seed", "transcript"], typer.Option(help="CI unit: (behavior, seed) with rollouts averaged, or transcript.")] = "seed",
    html: Annotated[Path | None, typer.Option(help="Also write a self-contained HTML report here.")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the results as JSON here.")] = None,
    reference: Annotated[bool, typer.Option(help="Show the paper's published rows (not reproduced here) beside ours.")] = True,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
) -> None:
    """Print the evaluation suite (audit quality, FP calibration, production, realism, composite; 95% CIs)."""
    console = Console()
    try:
        transcripts = load_transcripts(run)
        unit_fn = seed_unit if unit == "seed" else transcript_unit
        results = [
            compute_suite(ts, label=name, unit=unit_fn, unit_name=unit, seed=seed)
            for name, ts in sorted(group_transcripts(transcripts, by).items())
        ]
    except (RunError, SuiteDataError) as exc:
        console.print(f"[red]error:[/red] {exc}", markup=True, highlight=False)
        raise typer.Exit(code=2) from exc
    ref = load_paper_reference() if reference else None
    console.print(suite_table(results, ref, title=f"Evaluation suite: {run}"))
    if json_out is not None:
        atomic_write_text(json_out, results_json(results))
    if html is not None:
        write_report(html, f"auditrl evaluation: {run.name}", [suite_section(results, ref)])
        console.print(f"report written to {html}")
