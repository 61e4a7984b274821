"""`auditrl strategies RUN`: cluster the auditors' strategies and show archetype shares per group."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from auditrl.analysis.strategies import (
    EmbedderName,
    Level,
    cluster_strategies,
    load_codebook,
)
from auditrl.analysis.summaries import strategy_summaries
from auditrl.atomic import atomic_write_text
from auditrl.cli.errors import fail
from auditrl.evaluate.groups import group_of
from auditrl.report.html import write_report
from auditrl.report.sections import strategy_section, transcripts_section
from auditrl.scaffold.store import RunError, load_transcripts


def strategies(
    run: Annotated[Path, typer.Argument(help="A transcripts.jsonl file, or a run directory holding transcripts*.jsonl.")],
    by: Annotated[str, typer.Option(help="Group by: auditor, target, target_family, behavior, or a metadata key.")] = "auditor",
    k: Annotated[int | None, typer.Option(help="Number of clusters (default: about one per 100 transcripts, at least 2).")] = None,
    embedder: Annotated[EmbedderName, typer.Option(help="minilm (sentence embeddings) or tfidf (fast).")] = "minilm",
    level: Annotated[Level, typer.Option(help="Show shares per archetype or per category.")] = "category",
    codebook: Annotated[Path | None, typer.Option(help="A codebook YAML to use instead of the shipped one.")] = None,
    seed: Annotated[int, typer.Option(help="Clustering seed.")] = 0,
    html: Annotated[Path | None, typer.Option(help="Also write a self-contained HTML report here.")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write clusters and labels as JSON here.")] = None,
) -> None:
    """Summarise each transcript's strategy, cluster the summaries and print archetype shares per group."""
    console = Console()
    try:
        transcripts = load_transcripts(run)
        book = load_codebook(codebook)
        if len(transcripts) < 2:
            raise RunError(f"{run}: strategy clustering needs at least 2 transcripts, found {len(transcripts)}")
        result = cluster_strategies(strategy_summaries(transcripts), k=k, seed=seed, embedder=embedder, codebook=book)
    except ValueError as exc:  # RunError, a bad codebook file, too few texts
        raise fail(str(exc), console) from exc
    groups = [group_of(t, by) for t in transcripts]
    console.print(result.clusters_table())
    console.print(result.distribution_table(groups, level))
    if json_out is not None:
        atomic_write_text(json_out, result.model_dump_json(indent=2))
    if html is not None:
        write_report(html, f"auditrl strategies: {run.name}", [strategy_section(result, groups), transcripts_section(transcripts)])
        console.print(f"report written to {html}")
