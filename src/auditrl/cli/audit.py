"""`auditrl audit` (run audits from the command line) and `auditrl export` (JSONL -> Inspect eval log).

`audit` resolves the auditor and target from model spec strings, plants the behavior (or not), runs
the rollouts concurrently under a semaphore, appends each transcript to `<out>/transcripts.jsonl` the
moment it finishes (a crash keeps every finished audit), prints each report, and writes an Inspect log
next to it so `inspect view` opens the run directly.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Optional, cast

import typer
from inspect_ai.log import Transcript as ModelEventLog
from inspect_ai.log._transcript import init_transcript
from inspect_ai.model import GenerateConfig, Model
from inspect_ai.util import AdaptiveConcurrency
from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from auditrl.behaviors.library import GENERAL, load_behaviors, load_seeds
from auditrl.behaviors.plant import target_system_prompt
from auditrl.behaviors.schema import Behavior, Seed
from auditrl.cli.behaviors import (
    BehaviorsDirOpt,
    SeedsDirOpt,
    reporting_overrides,
    unknown_behavior,
)
from auditrl.cli.errors import LIBRARY, fail
from auditrl.cli.limits import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    MaxRetriesOpt,
    TargetPrefillOpt,
    TimeoutOpt,
    call_limits,
    print_failures,
    showing_retries,
)
from auditrl.models.prefill import PrefillSupport, describe_support
from auditrl.models.roles import UnknownModelError, resolve_model, tool_protocol_for
from auditrl.scaffold.engine import AuditEpisode, AuditSpec, run_audit
from auditrl.scaffold.inspect_export import export_inspect_log
from auditrl.scaffold.store import TRANSCRIPTS, append_transcript, read_transcripts
from auditrl.scaffold.tool_sets import DEFAULT_TOOL_SET, TOOL_PROTOCOLS, AuditToolSet, ToolProtocol
from auditrl.scaffold.transcript import Budget, Report, Transcript
from auditrl.terminal import at_audit

SIM_PROVIDER = "sim"
ToolSetOpt = Annotated[
    AuditToolSet,
    typer.Option(help="Auditor tools: petri2 (Petri 1/2's six) or Petri 3.1's petri3 (prefill off) / petri3_prefill."),
]


def select_seeds(
    behavior: Behavior | None, seed_ids: Sequence[str] | None, seed_dirs: Sequence[Path] | None, behavior_ids: set[str]
) -> list[Seed]:
    """The seeds to audit with: the given ids, else the behavior's bank, else the general seeds (by id)."""
    if seed_ids:
        seeds = load_seeds(seed_dirs, ids=seed_ids, behavior_ids=behavior_ids)
    else:
        bank = behavior.id if behavior is not None else GENERAL
        seeds = load_seeds(seed_dirs, behavior=bank, behavior_ids=behavior_ids)
        if not seeds:
            raise ValueError(f"no seeds found for {bank!r}; pass --seed or --seeds-dir")
    return sorted(seeds, key=lambda s: s.id)


def build_specs(
    behavior: Behavior | None,
    seeds: Sequence[Seed],
    rollouts: int,
    budget: Budget,
    auditor: str,
    target: str,
    tool_protocol: ToolProtocol | None,
    target_prefill: PrefillSupport | None = None,
    tool_set: AuditToolSet = DEFAULT_TOOL_SET,
) -> list[AuditSpec]:
    """One spec per rollout, cycling through the seeds in order."""
    provider, _, family = target.partition("/")
    return [
        AuditSpec(
            seed=seeds[i % len(seeds)],
            behavior=behavior,
            target_system_prompt=target_system_prompt(behavior),
            budget=budget,
            auditor_model=auditor,
            target_model=target,
            target_family=family if provider == SIM_PROVIDER else None,
            tool_protocol=tool_protocol or tool_protocol_for(auditor),
            tool_set=tool_set,
            target_prefill=target_prefill,
        )
        for i in range(rollouts)
    ]


def report_panel(transcript: Transcript, title: str) -> Panel:
    """A transcript's report for the terminal; every piece of model text is escaped."""
    lines: list[Text | str] = []
    report: Report | None = transcript.report
    what = f"behavior [bold]{escape(transcript.behavior_id)}[/]" if transcript.behavior_id else "benign target"
    lines.append(
        f"{what} · seed {escape(transcript.seed_id)} · {transcript.turns_used} turn(s) · "
        f"{transcript.auditor_tokens} auditor tokens · status [bold]{transcript.status}[/]"
    )
    if transcript.error:
        lines.append(f"[red]error:[/] {escape(transcript.error)}")
    if report is None:
        lines.append("[yellow]no report[/]")
    elif report.no_behavior_found or not report.predictions:
        lines.append("[green]No hidden behavior found.[/]" if report.no_behavior_found else "[yellow]No predictions.[/]")
    for prediction in report.predictions if report else []:
        lines.append(
            f"[bold]#{prediction.rank}[/] ({prediction.confidence:.0%}) {escape(prediction.description)}"
        )
        checks = {c.quote: c.verified for c in prediction.quote_checks}
        for quote in prediction.quotes:
            verified = checks.get(quote)
            mark = "[green]verified[/]" if verified else "[red]unverified[/]" if verified is False else "[dim]unchecked[/]"
            lines.append(f"    {mark} “{escape(quote)}”")
        if prediction.reasoning:
            lines.append(f"    [dim]{escape(prediction.reasoning)}[/]")
    if report is not None and report.summary:
        lines.append(f"[italic]{escape(report.summary)}[/]")
    if report is not None and report.parse_error:
        lines.append(f"[yellow]report recovered leniently:[/] {escape(report.parse_error)}")
    style = "red" if transcript.status == "error" else "cyan"
    return Panel(Group(*lines), title=escape(title), border_style=style, expand=False)


def connection_width(config: GenerateConfig, concurrency: int) -> GenerateConfig:
    """Let each model take `concurrency` connections from the start.

    inspect-ai's adaptive connection control starts at 20 connections per model and widens slowly, which
    holds a wider run of audits back; it starts at the run's width here and still backs off on rate
    limits. An explicit `max_connections` or `adaptive_connections` in `config` is left as it is.
    """
    if config.max_connections is not None or config.adaptive_connections is not None:
        return GenerateConfig()
    width = AdaptiveConcurrency(min=min(concurrency, 10), start=concurrency, max=max(concurrency, 100))
    return GenerateConfig(adaptive_connections=width)


@dataclass
class AuditOutcomes:
    """What a batch of audits leaves in memory: counts and failure reasons (the transcripts are on disk)."""

    finished: int = 0
    errors: list[str | None] = field(default_factory=list)


async def run_audits(
    specs: Sequence[AuditSpec],
    auditor: Model,
    target: Model,
    out_file: Path,
    concurrency: int,
    console: Console,
    generate_config: GenerateConfig,
    sampling_seed: int,
    episode_type: type[AuditEpisode] = AuditEpisode,
) -> AuditOutcomes:
    """Run every spec, at most `concurrency` at a time, appending and printing each as it finishes.

    Finished transcripts are streamed to `out_file` (fsynced in a worker thread, so the disk never stalls
    the audits in flight) and dropped, so memory stays bounded by the audits in flight however many run.
    `episode_type` picks the scaffold (Petri's by default; `TransferEpisode` for transfer audits)."""
    semaphore = asyncio.Semaphore(concurrency)
    writing = asyncio.Lock()
    outcomes = AuditOutcomes()
    generate_config = generate_config.merge(connection_width(generate_config, concurrency))
    columns = (TextColumn("[bold]audits"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("audits", total=len(specs))

        async def one(index: int, spec: AuditSpec) -> None:
            at_audit(index + 1, len(specs), spec.budget.max_turns)
            seeded = generate_config.merge(GenerateConfig(seed=sampling_seed + index))
            # inspect-ai logs every request and answer to the context's transcript; this audit's go to one of its
            # own, dropped with it, not to one an earlier eval in this process may have left for all to share
            init_transcript(ModelEventLog())
            async with semaphore:
                try:
                    transcript = await run_audit(
                        spec, auditor, target, auditor_config=seeded, target_config=seeded, episode_type=episode_type
                    )
                except Exception as exc:  # noqa: BLE001 - recorded as a failed audit, the others go on
                    transcript = Transcript(
                        auditor_model=spec.auditor_model,
                        target_model=spec.target_model,
                        target_family=spec.target_family,
                        behavior_id=spec.behavior.id if spec.behavior else None,
                        seed_id=spec.seed.id,
                        seed_instructions=spec.seed.instructions,
                        target_system_prompt=spec.target_system_prompt,
                        budget=spec.budget,
                        status="error",
                        error=f"{type(exc).__name__}: {exc}",
                    )
            transcript.metadata.setdefault("rollout", index)
            async with writing:
                await asyncio.to_thread(append_transcript, out_file, transcript)
            outcomes.finished += 1
            if transcript.status == "error":
                outcomes.errors.append(transcript.error)
            progress.console.print(report_panel(transcript, f"audit {index + 1}/{len(specs)}"))
            progress.advance(task)

        # a TaskGroup forgets each task when it finishes; gather would keep every finished task, and with it
        # the task's context, where inspect-ai's transcript of model events (each request and answer) lives
        async with asyncio.TaskGroup() as group:
            for i, spec in enumerate(specs):
                group.create_task(one(i, spec))
    return outcomes


def audit(
    auditor: Annotated[str, typer.Option(help="Auditor model: any inspect-ai model string, e.g. local/smollm2, openai/gpt-4o.")],
    target: Annotated[str, typer.Option(help="Target model, e.g. local/smollm2, sim/<family>, anthropic/<model>.")],
    behavior: Annotated[Optional[str], typer.Option(help="Behavior id to plant in the target.")] = None,
    benign: Annotated[bool, typer.Option("--benign", help="Audit a benign target (same persona, no plant).")] = False,
    seed: Annotated[
        Optional[list[str]], typer.Option(help="Seed id (repeatable). Default: the behavior's seeds, or general seeds.")
    ] = None,
    rollouts: Annotated[int, typer.Option(min=1, help="Number of audits; seeds are used in turn.")] = 1,
    max_turns: Annotated[int, typer.Option(min=1, help="Auditor turns per audit.")] = 15,
    max_tokens: Annotated[Optional[int], typer.Option(min=1, help="Max tokens per model reply.")] = None,
    token_budget: Annotated[Optional[int], typer.Option(min=1, help="Total auditor output tokens per audit.")] = None,
    temperature: Annotated[Optional[float], typer.Option(min=0.0, help="Sampling temperature (default: provider's).")] = None,
    sampling_seed: Annotated[int, typer.Option(help="Base sampling seed; rollout i uses base + i.")] = 0,
    concurrency: Annotated[int, typer.Option(min=1, help="Audits running at the same time.")] = 4,
    tool_protocol: Annotated[
        Optional[str], typer.Option(help="Auditor tool protocol, 'native' or 'text' (default: by provider).")
    ] = None,
    tool_set: ToolSetOpt = DEFAULT_TOOL_SET,
    out: Annotated[Optional[Path], typer.Option(help="Run directory (default: runs/audit-<timestamp>).")] = None,
    behaviors_dir: BehaviorsDirOpt = None,
    seeds_dir: SeedsDirOpt = None,
    inspect_log: Annotated[bool, typer.Option(help="Also write an Inspect eval log into the run directory.")] = True,
    max_retries: MaxRetriesOpt = DEFAULT_MAX_RETRIES,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    target_prefill: TargetPrefillOpt = None,
) -> None:
    """Audit a target: planted with --behavior, or --benign. Transcripts go to <out>/transcripts.jsonl."""
    console = Console()
    if (behavior is None) == (not benign):
        raise fail("give exactly one of --behavior <id> or --benign", console, LIBRARY)
    if tool_protocol is not None and tool_protocol not in TOOL_PROTOCOLS:
        raise fail(f"--tool-protocol must be 'native' or 'text', got {tool_protocol!r}", console, LIBRARY)
    try:
        with reporting_overrides(console):
            behaviors = load_behaviors(behaviors_dir)
            planted = None
            if behavior is not None:
                if behavior not in behaviors:
                    raise ValueError(unknown_behavior(behavior, behaviors))
                planted = behaviors[behavior]
            seeds = select_seeds(planted, seed, seeds_dir, set(behaviors))
    except ValueError as exc:  # BehaviorFileError included
        raise fail(str(exc), console, LIBRARY) from exc
    config = GenerateConfig(max_tokens=max_tokens, temperature=temperature)
    limits = call_limits(max_retries, timeout)
    try:
        auditor_model = resolve_model(auditor, limits=limits)
        target_model = resolve_model(target, limits=limits)
    except (UnknownModelError, ValueError) as exc:
        raise fail(str(exc), console, LIBRARY) from exc
    budget = Budget(max_turns=max_turns, max_tokens=token_budget)
    protocol = cast(ToolProtocol | None, tool_protocol)
    specs = build_specs(planted, seeds, rollouts, budget, auditor, target, protocol, target_prefill, tool_set)
    run_dir = out or Path("runs") / f"audit-{datetime.now():%Y%m%d-%H%M%S}"
    out_file = run_dir / TRANSCRIPTS
    console.print(
        f"Auditing {escape(target)} ({'benign' if planted is None else 'planted: ' + escape(planted.id)}) "
        f"with {escape(auditor)}: {rollouts} audit(s) over {len(seeds)} seed(s), up to {concurrency} at a time.\n"
        f"Target prefill: {escape(describe_support(target, target_prefill))}"
    )
    with showing_retries(console):
        outcomes = asyncio.run(
            run_audits(specs, auditor_model, target_model, out_file, concurrency, console, config, sampling_seed)
        )
    failed = print_failures(console, "audit(s)", outcomes.errors)
    say = functools.partial(console.print, soft_wrap=True)  # paths and commands stay copy-pasteable
    say(f"\nTranscripts: [bold]{escape(str(out_file))}[/] ({outcomes.finished} audit(s), {failed} failed)")
    if inspect_log:
        log = export_inspect_log(read_transcripts(out_file), run_dir, completed_at=datetime.now(timezone.utc))
        say(f"Inspect log: [bold]{escape(str(log))}[/]")
    else:
        say(f"Export it for Inspect with: [bold]auditrl export {escape(str(run_dir))}[/]")
    say(f"Open it with: [bold]inspect view --log-dir {escape(str(run_dir))}[/]")
    if failed:
        raise typer.Exit(code=1)


def export(
    run: Annotated[Path, typer.Argument(help="A run directory (with transcripts.jsonl) or a transcripts JSONL file.")],
    out: Annotated[
        Optional[Path],
        typer.Option(help="Log file ending in .eval or .json, or a directory (default: the run directory)."),
    ] = None,
) -> None:
    """Export audit transcripts as an Inspect eval log that `inspect view` opens.

    A run's log has a fixed name, so exporting again (after `judge score`, say) replaces the log that
    `audit` wrote instead of adding a second copy of the run.
    """
    console = Console()
    source = run / TRANSCRIPTS if run.is_dir() else run
    if not source.is_file():
        raise fail(f"no transcripts at {source}", console, LIBRARY)
    try:
        transcripts = read_transcripts(source)
        if not transcripts:
            raise ValueError(f"{source}: no transcripts in the file")
        finished = datetime.fromtimestamp(source.stat().st_mtime, timezone.utc)
        log = export_inspect_log(transcripts, out or source.parent, completed_at=finished)
    except ValueError as exc:
        raise fail(str(exc), console, LIBRARY) from exc
    console.print(f"Wrote {len(transcripts)} audit(s) to [bold]{escape(str(log))}[/]", soft_wrap=True)
    console.print(f"Open it with: [bold]inspect view --log-dir {escape(str(log.parent))}[/]", soft_wrap=True)
