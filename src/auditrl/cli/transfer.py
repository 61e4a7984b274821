"""`auditrl transfer`: AuditBench-style transfer audits (one sampling tool, a token budget, ranked
predictions graded by a match judge) against implanted targets or any model string, and the results
table that compares auditors."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from auditrl.atomic import atomic_write_text
from auditrl.cli.errors import FAILURE, fail, finish
from auditrl.cli.limits import call_limits, opened_run, print_failures, ready_models, showing_retries
from auditrl.cli.options import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    PROGRAMMATIC,
    BehaviorsDirOpt,
    HtmlOpt,
    JsonOpt,
    JudgeCacheOpt,
    MaxRetriesOpt,
    MaxTokensOpt,
    OnExistingOpt,
    TemperatureOpt,
    TimeoutOpt,
    concurrency_option,
    judge_option,
    max_turns_option,
    out_dir_option,
    random_seed_option,
)
from auditrl.cli.outputs import ReportFiles, json_text, table_section, transcripts_part

if TYPE_CHECKING:
    from rich.table import Table

    from auditrl.evaluate.transfer import TransferRow
    from auditrl.stats import Estimate

RESULTS = "transfer.json"


def targets_with_behaviors(targets: list[str], behaviors: list[str]) -> list[tuple[str, str]]:
    """Pair each target with the behavior to match: one --behavior for all, one per target, or the implant's own."""
    from auditrl.targets.record import implanted_behavior

    if behaviors and len(behaviors) not in (1, len(targets)):
        raise ValueError(
            f"give one --behavior for all targets or one per target ({len(targets)}), got {len(behaviors)}"
        )
    pairs = []
    for i, target in enumerate(targets):
        behavior = behaviors[0 if len(behaviors) == 1 else i] if behaviors else implanted_behavior(target)
        if behavior is None:
            raise ValueError(f"--target {target}: not an implant directory with implant.json; give its --behavior")
        pairs.append((target, behavior))
    return pairs


def _rate(e: Estimate) -> str:
    """A percentage over two lines (mean, then its interval), or "-" when no audit could be scored."""
    return "-" if e.n == 0 else f"{e.mean:.1f}\n[{e.lo:.1f}, {e.hi:.1f}]"


def table(rows: list[TransferRow]) -> Table:
    """One row per auditor, target and behavior; it fits 80 columns, the names folding onto further lines."""
    from rich.table import Table

    out = Table(
        title="Transfer: detection of the implanted behavior",
        caption="Detected: one of the 3 ranked predictions matches the behavior; top-1: the first one does. "
        "Mean [95% CI] in % over audits; failed audits and abstaining judgements are left out of both.",
        caption_justify="left",
    )
    out.add_column("Auditor → target, behavior", overflow="fold", min_width=16)
    for name in ("Detected %", "Top-1 %", "Audits", "Tokens"):
        out.add_column(name, justify="right", no_wrap=True)
    for r in rows:
        plant = " + system-prompt plant" if r.system_prompt_plant else ""
        counts = [
            str(r.audits),
            *([f"{r.failed} failed"] if r.failed else []),
            *([f"{r.abstained} abstained"] if r.abstained else []),
        ]
        out.add_row(
            f"{escape(r.auditor)} →\n{escape(r.target)}\n[dim]{escape(r.behavior)}{plant}[/dim]",
            _rate(r.detection),
            _rate(r.top1),
            "\n".join(counts),
            f"{r.mean_tokens:.0f}",
            end_section=True,
        )
    return out


def transfer(
    auditor: Annotated[list[str], typer.Option(help="Auditor model (repeatable): any model string.")],
    target: Annotated[
        list[str],
        typer.Option(
            help="Target (repeatable): local/<implant-dir>, vllm/<model-id>, hf/<model-id>, any model string."
        ),
    ],
    behavior: Annotated[
        list[str] | None,
        typer.Option(help="Behavior to match: one for all targets or one per target (default: the implant's own)."),
    ] = None,
    plant_prompt: Annotated[
        bool, typer.Option("--plant-prompt", help="Also give each target the system-prompt plant of its behavior.")
    ] = False,
    rollouts: Annotated[int, typer.Option(min=1, help="Audits per auditor and target.")] = 4,
    token_budget: Annotated[int, typer.Option(min=1, help="Auditor output tokens per audit before the report.")] = 2000,
    max_turns: Annotated[
        int, max_turns_option("Safety cap on auditor turns per audit (the token budget ends it first).")
    ] = 50,
    max_tokens: MaxTokensOpt = None,
    temperature: TemperatureOpt = None,
    random_seed: Annotated[int, random_seed_option("model sampling; audit i uses this + i")] = 0,
    concurrency: Annotated[int, concurrency_option("Audits running")] = 4,
    judge: Annotated[
        str,
        judge_option(f"Match judge: a model spec, or '{PROGRAMMATIC}' (a prediction names the behavior id or name)."),
    ] = PROGRAMMATIC,
    judge_cache: JudgeCacheOpt = None,
    out: Annotated[
        Path, out_dir_option("Run directory; transcripts accumulate here, so runs of several auditors share one table.")
    ] = Path("runs/transfer"),
    on_existing: OnExistingOpt = "resume",
    behaviors_dir: BehaviorsDirOpt = None,
    max_retries: MaxRetriesOpt = DEFAULT_MAX_RETRIES,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    html: HtmlOpt = None,
    json_out: JsonOpt = None,
) -> None:
    """Audit targets in the transfer scaffold, grade the predictions and print the detection table."""
    import asyncio

    from inspect_ai.model import GenerateConfig
    from rich.progress import Progress

    from auditrl.behaviors.library import BehaviorFileError, load_behaviors
    from auditrl.behaviors.plant import render_plant
    from auditrl.cli.judge import judge_client
    from auditrl.evaluate.transfer import grade, transfer_table
    from auditrl.judges.prediction_match import PredictionMatcher, PredictionMatchJudge
    from auditrl.judges.programmatic import ProgrammaticPredictionMatchJudge
    from auditrl.models.roles import tool_protocol_for
    from auditrl.scaffold.runner import RunStopped, audit_jobs, run_audits
    from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts, write_transcripts
    from auditrl.scaffold.transfer import TransferEpisode, transfer_spec

    console = Console()
    try:
        library = load_behaviors(behaviors_dir)
        pairs = targets_with_behaviors(target, behavior or [])
    except (BehaviorFileError, ValueError) as exc:
        raise fail(str(exc)) from exc
    missing = sorted({b for _, b in pairs if b not in library})
    if missing:
        raise fail(f"unknown behavior(s): {', '.join(missing)} (see `auditrl behaviors list`)")
    reports = ReportFiles(html, json_out)
    reports.check((out / TRANSCRIPTS,))
    matcher: PredictionMatcher
    limits = call_limits(max_retries, timeout)
    client = judge_client(judge, judge_cache, 2, limits)
    matcher = ProgrammaticPredictionMatchJudge() if client is None else PredictionMatchJudge(client)
    config = GenerateConfig(max_tokens=max_tokens, temperature=temperature)
    models = ready_models({"--auditor": auditor, "--target": [t for t, _ in pairs]}, limits)
    log = opened_run(out / TRANSCRIPTS, on_existing, "transfer", {"behaviors": sorted({b for _, b in pairs})})
    out_file = log.path
    for auditor_spec in auditor:
        for target_spec, behavior_id in pairs:
            planted = library[behavior_id]
            spec = transfer_spec(
                auditor_model=auditor_spec,
                target_model=target_spec,
                behavior=planted,
                target_system_prompt=render_plant(planted) if plant_prompt else "",
                token_budget=token_budget,
                max_samples=max_turns,
                tool_protocol=tool_protocol_for(auditor_spec),
            )
            jobs = audit_jobs(
                [spec] * rollouts, models[auditor_spec], models[target_spec], sampling_seed=random_seed,
                episode_type=TransferEpisode,
            )  # fmt: skip
            jobs = log.plan(jobs)
            console.print(
                f"Transfer audits of {escape(target_spec)} "
                f"({escape(behavior_id)}{', system-prompt plant' if plant_prompt else ''}) by "
                f"{escape(auditor_spec)}: {len(jobs)} of {rollouts} to run"
            )
            if (existing := log.describe()) is not None:
                console.print(f"[yellow]{escape(existing)}[/]", soft_wrap=True)
            try:
                with showing_retries(console):
                    outcomes = asyncio.run(
                        run_audits(jobs, log, concurrency=concurrency, config=config, console=console)
                    )
            except RunStopped as exc:
                raise fail(f"{exc}; run the same command again to resume", FAILURE) from exc
            print_failures(console, "audit(s)", outcomes.errors)
    transcripts = read_transcripts(out_file)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("grading", total=None)
        try:
            with showing_retries(console):
                asyncio.run(grade(transcripts, matcher, library, on_done=lambda: progress.advance(task)))
        except ValueError as exc:
            raise fail(str(exc), FAILURE) from exc
    if client is not None:
        print_failures(console, "judge verdict(s)", client.failures.elements())
    write_transcripts(out_file, transcripts)
    rows = transfer_table(transcripts)
    shown = table(rows)
    console.print(shown)
    results = out / RESULTS
    atomic_write_text(results, "[\n" + ",\n".join(r.model_dump_json() for r in rows) + "\n]\n")
    console.print(
        f"Transcripts: [bold]{escape(str(out_file))}[/]  results: [bold]{escape(str(results))}[/]", soft_wrap=True
    )
    reports.write(
        console,
        f"auditrl transfer: {out}",
        lambda: [table_section("Transfer", [shown]), transcripts_part(transcripts)],
        lambda: json_text(rows),
    )
    finish(sum(t.status == "error" for t in transcripts), len(transcripts))
