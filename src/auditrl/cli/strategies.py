"""`auditrl strategies RUN`: cluster the auditors' strategies, derive a codebook from them, show shares per group.

Transcripts are read one at a time and only their strategy summaries are kept, so a run of tens of
thousands of audits fits in a little memory; a handful are kept whole for the report's viewer.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import pydantic_core
import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from auditrl.analysis.choices import ARCHETYPES, CATEGORIES, DEFAULT_CLASSIFIER, Classifier, EmbedderName, Level
from auditrl.analysis.codebook import codebook_texts, load_codebook
from auditrl.atomic import atomic_write_text, check_output
from auditrl.cli.errors import fail
from auditrl.cli.limits import call_limits, ready_models
from auditrl.cli.options import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    HtmlOpt,
    MaxRetriesOpt,
    TimeoutOpt,
    random_seed_option,
)
from auditrl.evaluate.groups import group_of
from auditrl.scaffold.store import RunError, transcript_files
from auditrl.scaffold.transcript import Transcript

PROGRESS_EVERY = 500
"""Transcripts summarised between updates of the progress line."""

if (
    TYPE_CHECKING
):  # scikit-learn, scipy and inspect-ai are imported when the command runs: a usage error answers at once
    from auditrl.analysis.derivation import StudyTable


def read_summaries(
    run: Path, by: str, console: Console, shown: int = 0
) -> tuple[list[str], list[str], list[str], list[Transcript]]:
    """Id, strategy summary and group of every transcript (a later file's copy of an id replaces the earlier), and the
    first `shown` of each auditor's planted and of its benign audits, whole. Only those are read whole; of the rest,
    only what a summary and a group need."""
    from auditrl.analysis.conduct import iter_conduct
    from auditrl.analysis.summaries import strategy_summary

    found: dict[str, tuple[str, str]] = {}
    kept: dict[tuple[str, bool], list[Transcript]] = {}
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True
    ) as progress:
        task = progress.add_task("summarising transcripts")
        files = transcript_files(run)
        for path in files:
            try:
                for t, whole in iter_conduct(path):
                    found[t.id] = (strategy_summary(t), group_of(t, by))
                    same = kept.setdefault((t.auditor_model, t.benign), [])
                    if len(same) < shown:
                        same.append(whole())
                    if len(found) % PROGRESS_EVERY == 0:
                        progress.update(task, description=f"summarising transcripts: {len(found):,}")
            except ValueError as exc:
                raise RunError(str(exc)) from exc
    console.print(
        escape(f"read {len(found)} transcript(s) from {', '.join(map(str, files))}"), highlight=False, soft_wrap=True
    )
    texts = [text for text, _ in found.values()]
    groups = [group for _, group in found.values()]
    return list(found), texts, groups, [t for ts in kept.values() for t in ts]


def strategies(
    run: Annotated[
        Path, typer.Argument(help="A transcripts file, or a run directory (its transcripts.jsonl and those below it).")
    ],
    by: Annotated[
        str, typer.Option(help="Group by: auditor, target, target_family, behavior, or a metadata key.")
    ] = "auditor",
    k: Annotated[
        int | None, typer.Option(help="Number of base clusters (default: about one per 100 transcripts, at least 2).")
    ] = None,
    embedder: Annotated[
        EmbedderName,
        typer.Option(
            help=(
                "auto (MiniLM up to 1,000 distinct summaries, LSA above), minilm, tfidf, or lsa (tf-idf + SVD, "
                "fast at scale)."
            )
        ),
    ] = "auto",
    classifier: Annotated[
        Classifier,
        typer.Option(
            help="How each summary gets its archetype: lsa (codebook words, fast) or minilm (sentence embeddings)."
        ),
    ] = DEFAULT_CLASSIFIER,
    level: Annotated[Level, typer.Option(help="Show shares per archetype or per category.")] = "category",
    codebook: Annotated[
        Path | None, typer.Option(help="A codebook YAML to classify against instead of the shipped one.")
    ] = None,
    derive: Annotated[
        bool, typer.Option(help="Also derive a codebook from the data, reclassify against it, measure stability.")
    ] = True,
    namer: Annotated[
        str | None,
        typer.Option(help="A model (inspect-ai string) that names groups and rolls them up; offline method without."),
    ] = None,
    strategies_n: Annotated[
        int | None, typer.Option("--strategies", help="Derived strategies (default: one per ten base clusters).")
    ] = None,
    archetypes: Annotated[int, typer.Option(help="Derived archetypes.")] = ARCHETYPES,
    categories: Annotated[int, typer.Option(help="Derived categories.")] = CATEGORIES,
    bootstraps: Annotated[int, typer.Option(help="Bootstrap refits for the stability figures (0 to skip).")] = 3,
    save_codebook: Annotated[
        Path | None, typer.Option(help="Write the frozen derived codebook here (YAML, usable with --codebook).")
    ] = None,
    random_seed: Annotated[int, random_seed_option("the embedding's projection and the clustering")] = 0,
    html: HtmlOpt = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write clusters, labels and the derived codebook as JSON here.")
    ] = None,
    max_retries: MaxRetriesOpt = DEFAULT_MAX_RETRIES,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
) -> None:
    """Summarise each transcript's strategy, cluster the summaries, derive a codebook and print shares per group."""
    from auditrl.analysis.derivation import study_codebook, study_tables
    from auditrl.analysis.representation import embed
    from auditrl.analysis.strategies import cluster_strategies

    console = Console()
    try:
        book = load_codebook(codebook)
        for option, path in {"--html": html, "--json": json_out, "--save-codebook": save_codebook}.items():
            if path is not None:
                check_output(path, f"{option} {path}", inputs=tuple(transcript_files(run)))
        shown_per_kind = 0
        if html is not None:  # the page's modules (and inspect-ai, which they import) load only for a page
            from auditrl.pages.transcript_view import DEFAULT_SHOWN

            shown_per_kind = DEFAULT_SHOWN
        ids, texts, groups, kept = read_summaries(run, by, console, shown_per_kind)
        if len(texts) < 2:
            raise RunError(f"{run}: strategy clustering needs at least 2 transcripts, found {len(texts)}")
        with console.status(f"embedding and clustering {len(texts):,} summaries"):
            emb = embed(texts, codebook_texts(book), embedder, random_seed)
            result = cluster_strategies(
                texts, k=k, seed=random_seed, codebook=book, embedded=emb, classifier=classifier
            )
        study = None
        if derive:
            naming = None
            if namer is not None:
                from auditrl.analysis.llm_naming import LLMNamer

                namer_model = ready_models({"--namer": [namer]}, call_limits(max_retries, timeout))[namer]
                naming = LLMNamer(namer_model, namer)
            with console.status("deriving a codebook, reclassifying, measuring stability"):
                sizes = {"strategy": strategies_n, "archetype": archetypes, "category": categories}
                study = study_codebook(result, emb, sizes, naming, bootstraps)
    except ValueError as exc:  # RunError, OutputError, a bad codebook file, too few texts
        raise fail(str(exc)) from exc
    console.print(result.clusters_table())
    console.print(result.distribution_table(groups, level))
    tables: Sequence[StudyTable] = study_tables(study, groups) if study is not None else []
    for table in tables:
        console.print(table.to_rich())
    if study is not None and study.derived.fallbacks:
        console.print("[yellow]" + escape("; ".join(study.derived.fallbacks)) + "[/yellow]")
    if study is not None and save_codebook is not None:
        atomic_write_text(save_codebook, yaml.safe_dump(study.frozen.model_dump(), sort_keys=False, allow_unicode=True))
        console.print(f"frozen codebook written to {escape(str(save_codebook))}")
    if json_out is not None:
        data = {"transcript_ids": ids, **result.model_dump(mode="json")} | (
            {"derived": study.model_dump(mode="json")} if study is not None else {}
        )
        atomic_write_text(json_out, pydantic_core.to_json(data, indent=2, ensure_ascii=True).decode())
    if html is not None:
        from auditrl.pages.html import write_page
        from auditrl.pages.sections import codebook_study_section, strategy_section, transcripts_section
        from auditrl.pages.transcript_view import pick_transcripts

        sections = [strategy_section(result, groups)]
        if study is not None:
            sections.append(codebook_study_section(study, tables))
        names = result.label_names("archetype")
        by_id = {tid: names[a] for tid, a in zip(ids, result.archetypes, strict=True)}
        source = f"the first {shown_per_kind} read of each auditor's planted and benign audits"
        shown_part = transcripts_section(pick_transcripts(kept), total=len(texts), source=source, archetypes=by_id)
        write_page(html, f"auditrl strategies: {run.name}", [*sections, shown_part])
        console.print(f"report written to {escape(str(html))}")
