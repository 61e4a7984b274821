"""`auditrl audit` (run audits from the command line) and `auditrl export` (JSONL -> Inspect eval log).

`audit` resolves the auditor and target from model spec strings, plants the behavior (or not), runs
the rollouts with the shared runner (auditrl.scaffold.runner: each transcript is appended to
`<out>/transcripts.jsonl` the moment it finishes, so a crash keeps every finished audit, and a run
directory that has audits is resumed), prints each report, and writes an Inspect log next to it so
`inspect view` opens the run directly.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError
from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from auditrl.atomic import check_output
from auditrl.behaviors.library import GENERAL, load_behaviors, load_seeds
from auditrl.behaviors.plant import target_system_prompt
from auditrl.behaviors.schema import Behavior, Seed
from auditrl.cli.behaviors import reporting_overrides, unknown_behavior
from auditrl.cli.errors import FAILURE, fail, finish, warn
from auditrl.cli.limits import call_limits, opened_run, print_failures, ready_models, showing_retries
from auditrl.cli.options import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    AuditorPromptOpt,
    BehaviorsDirOpt,
    MaxRetriesOpt,
    MaxTokensOpt,
    OnExistingOpt,
    SeedsDirOpt,
    TargetPrefillOpt,
    TemperatureOpt,
    TimeoutOpt,
    ToolProtocolOpt,
    ToolSetOpt,
    concurrency_option,
    max_turns_option,
    out_dir_option,
    random_seed_option,
    seed_ids_option,
)
from auditrl.models.capabilities import provider_info
from auditrl.safe_text import for_terminal
from auditrl.scaffold.prompt_sets import AuditorPrompt
from auditrl.scaffold.store import TRANSCRIPTS, RunError, read_run, read_transcripts
from auditrl.scaffold.tool_sets import DEFAULT_TOOL_SET, AuditToolSet, ToolProtocol
from auditrl.scaffold.transcript import Budget, Report, Transcript
from auditrl.scaffold.transcript_keys import ROLLOUT

if TYPE_CHECKING:  # inspect-ai is imported when an audit runs, so that a usage error answers at once
    from auditrl.models.prefill import PrefillSupport
    from auditrl.scaffold.spec import AuditSpec


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
            raise ValueError(f"no seeds found for {bank!r}; pass --seed-id or --seeds-dir")
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
    auditor_prompt: AuditorPrompt = "full",
) -> Sequence[AuditSpec]:
    """One spec per rollout, cycling through the seeds in order; made when asked for, so memory does not grow
    with `rollouts`. The first is made here, so a spec that cannot be made fails before anything runs."""
    from auditrl.models.roles import tool_protocol_for
    from auditrl.scaffold.runner import OnDemand
    from auditrl.scaffold.spec import AuditSpec

    provider, _, family = target.partition("/")
    spec = functools.partial(
        AuditSpec,
        behavior=behavior,
        target_system_prompt=target_system_prompt(behavior),
        budget=budget,
        auditor_model=auditor,
        target_model=target,
        target_family=family if provider_info(provider).family_targets else None,
        tool_protocol=tool_protocol or tool_protocol_for(auditor),
        tool_set=tool_set,
        auditor_prompt=auditor_prompt,
        target_prefill=target_prefill,
    )
    specs = OnDemand(rollouts, lambda i: spec(seed=seeds[i % len(seeds)]))
    if rollouts:
        specs[0]
    return specs


def _shown(text: str) -> str:
    """Model text for a panel: markup escaped, control characters made visible, long text clipped."""
    return escape(for_terminal(text))


def report_panel(transcript: Transcript, title: str) -> Panel:
    """A transcript's report for the terminal; every piece of model text is escaped and clipped."""
    lines: list[Text | str] = []
    report: Report | None = transcript.report
    what = f"behavior [bold]{escape(transcript.behavior_id)}[/]" if transcript.behavior_id else "benign target"
    lines.append(
        f"{what} · seed {escape(transcript.seed_id)} · {transcript.turns_used} turn(s) · "
        f"{transcript.auditor_tokens} auditor tokens · status [bold]{transcript.status}[/]"
    )
    if transcript.error:
        lines.append(f"[red]error:[/] {_shown(transcript.error)}")
    if report is None:
        lines.append("[yellow]no report[/]")
    elif report.no_behavior_found or not report.predictions:
        lines.append(
            "[green]No hidden behavior found.[/]" if report.no_behavior_found else "[yellow]No predictions.[/]"
        )
    for prediction in report.predictions if report else []:
        lines.append(f"[bold]#{prediction.rank}[/] ({prediction.confidence:.0%}) {_shown(prediction.description)}")
        checks = {c.quote: c.verified for c in prediction.quote_checks}
        for quote in prediction.quotes:
            verified = checks.get(quote)
            mark = (
                "[green]verified[/]" if verified else "[red]unverified[/]" if verified is False else "[dim]unchecked[/]"
            )
            lines.append(f"    {mark} “{_shown(quote)}”")
        if prediction.reasoning:
            lines.append(f"    [dim]{_shown(prediction.reasoning)}[/]")
    if report is not None and report.summary:
        lines.append(f"[italic]{_shown(report.summary)}[/]")
    if report is not None and report.parse_error:
        lines.append(f"[yellow]report recovered leniently:[/] {_shown(report.parse_error)}")
    style = "red" if transcript.status == "error" else "cyan"
    return Panel(Group(*lines), title=escape(title), border_style=style, expand=False)


def audit(
    auditor: Annotated[
        str, typer.Option(help="Auditor model: any inspect-ai model string, e.g. local/smollm2, openai/gpt-4o.")
    ],
    target: Annotated[str, typer.Option(help="Target model, e.g. local/smollm2, sim/<family>, anthropic/<model>.")],
    behavior: Annotated[str | None, typer.Option(help="Behavior id to plant in the target.")] = None,
    benign: Annotated[bool, typer.Option("--benign", help="Audit a benign target (same persona, no plant).")] = False,
    seed_id: Annotated[
        list[str] | None, seed_ids_option("Seed id (repeatable). Default: the behavior's seeds, or general seeds.")
    ] = None,
    rollouts: Annotated[int, typer.Option(min=1, help="Number of audits; seeds are used in turn.")] = 1,
    max_turns: Annotated[int, max_turns_option("Auditor turns per audit.")] = 15,
    max_tokens: MaxTokensOpt = None,
    token_budget: Annotated[int | None, typer.Option(min=1, help="Total auditor output tokens per audit.")] = None,
    temperature: TemperatureOpt = None,
    random_seed: Annotated[int, random_seed_option("model sampling; rollout i uses this + i")] = 0,
    concurrency: Annotated[int, concurrency_option("Audits running")] = 4,
    tool_protocol: ToolProtocolOpt = None,
    tool_set: ToolSetOpt = DEFAULT_TOOL_SET,
    auditor_prompt: AuditorPromptOpt = "full",
    out: Annotated[Path | None, out_dir_option("Run directory (default: runs/audit-<timestamp>).")] = None,
    on_existing: OnExistingOpt = "resume",
    behaviors_dir: BehaviorsDirOpt = None,
    seeds_dir: SeedsDirOpt = None,
    inspect_log: Annotated[bool, typer.Option(help="Also write an Inspect eval log into the run directory.")] = True,
    max_retries: MaxRetriesOpt = DEFAULT_MAX_RETRIES,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    target_prefill: TargetPrefillOpt = None,
) -> None:
    """Audit a target: planted with --behavior, or --benign. Transcripts go to <out>/transcripts.jsonl.

    On a run directory that already has audits, the run resumes: the (seed, rollout) audits it has are
    skipped and failed ones run again (see --on-existing).
    """
    from inspect_ai.model import GenerateConfig

    from auditrl.evaluate.inspect_export import export_inspect_log
    from auditrl.models.prefill import describe_support
    from auditrl.scaffold.runner import RunStopped, audit_jobs, run_audits

    console = Console()
    if (behavior is None) == (not benign):
        raise fail("give exactly one of --behavior <id> or --benign")
    try:
        with reporting_overrides(console):
            behaviors = load_behaviors(behaviors_dir)
            planted = None
            if behavior is not None:
                if behavior not in behaviors:
                    raise ValueError(unknown_behavior(behavior, behaviors))
                planted = behaviors[behavior]
            seeds = select_seeds(planted, seed_id, seeds_dir, set(behaviors))
    except ValueError as exc:  # BehaviorFileError included
        raise fail(str(exc)) from exc
    config = GenerateConfig(max_tokens=max_tokens, temperature=temperature)
    limits = call_limits(max_retries, timeout)
    models = ready_models({"--auditor": [auditor], "--target": [target]}, limits)
    auditor_model, target_model = models[auditor], models[target]
    run_dir = out or Path("runs") / f"audit-{datetime.now():%Y%m%d-%H%M%S}"
    budget = Budget(max_turns=max_turns, max_tokens=token_budget)
    try:
        specs = build_specs(
            planted, seeds, rollouts, budget, auditor, target, tool_protocol, target_prefill, tool_set, auditor_prompt
        )
    except ValidationError as exc:  # a prompt set the tool protocol or tool set cannot carry
        raise fail(
            f"--auditor-prompt {auditor_prompt}: " + exc.errors()[0]["msg"].removeprefix("Value error, ")
        ) from exc
    contract = {
        "auditor": auditor,
        "target": target,
        "behaviors": [planted.id] if planted is not None else [],
        "seeds": [s.id for s in seeds],
    }
    log = opened_run(run_dir / TRANSCRIPTS, on_existing, "audit", contract)
    first = log.next_rollout if on_existing == "append" else 0
    jobs = log.plan(audit_jobs(specs, auditor_model, target_model, sampling_seed=random_seed, first_rollout=first))
    say = functools.partial(console.print, soft_wrap=True)  # paths and commands stay copy-pasteable
    console.print(
        f"Auditing {escape(target)} ({'benign' if planted is None else 'planted: ' + escape(planted.id)}) "
        f"with {escape(auditor)}: {rollouts} audit(s) over {len(seeds)} seed(s), up to {concurrency} at a time.\n"
        f"Target prefill: {escape(describe_support(target, target_prefill))}"
    )
    if (existing := log.describe()) is not None:
        say(f"[yellow]{escape(existing)}[/]")
    done = 0

    def show(transcript: Transcript) -> None:
        nonlocal done
        done += 1
        console.print(report_panel(transcript, f"audit {done}/{len(jobs)} (rollout {transcript.metadata[ROLLOUT]})"))

    try:
        with showing_retries(console):
            outcomes = asyncio.run(
                run_audits(jobs, log, concurrency=concurrency, config=config, on_done=show, console=console)
            )
    except RunStopped as exc:
        raise fail(f"{exc}; free space and run the same command again to resume", FAILURE) from exc
    failed = print_failures(console, "audit(s)", outcomes.errors)
    say(f"\nTranscripts: [bold]{escape(str(log.path))}[/] (added {outcomes.finished} audit(s), {failed} failed)")
    if inspect_log and log.path.is_file():
        try:
            written = export_inspect_log(read_transcripts(log.path), run_dir, completed_at=datetime.now(UTC))
        except OSError as exc:
            raise fail(f"the transcripts are stored, but the Inspect log could not be written: {exc}", FAILURE) from exc
        say(f"Inspect log: [bold]{escape(str(written))}[/]")
    else:
        say(f"Export it for Inspect with: [bold]auditrl export {escape(str(run_dir))}[/]")
    say(f"Open it with: [bold]inspect view --log-dir {escape(str(run_dir))}[/]")
    finish(failed, len(jobs))


def export(
    run: Annotated[Path, typer.Argument(help="A run directory (with transcripts.jsonl) or a transcripts JSONL file.")],
    out: Annotated[Path | None, out_dir_option("Directory the log is written in (default: the run directory).")] = None,
) -> None:
    """Export audit transcripts as an Inspect eval log that `inspect view` opens.

    A run's log has a fixed name, so exporting again (after `judge score`, say) replaces the log that
    `audit` wrote instead of adding a second copy of the run.
    """
    from auditrl.evaluate.inspect_export import LOG_SUFFIXES, export_inspect_log, log_file_name, log_path

    console = Console()
    if out is not None and out.suffix in LOG_SUFFIXES:
        warn(
            f"`auditrl export --out {out}` (a log file) is deprecated and will be removed: --out is the directory "
            "the log is written in; writing this file as before"
        )
    try:
        loaded = read_run(run)
    except RunError as exc:
        raise fail(str(exc)) from exc
    source = loaded.files[-1]
    try:
        if out is not None and out.suffix in LOG_SUFFIXES:
            destination = log_path(loaded.transcripts, out)
        else:
            directory = out or source.parent
            check_output(directory, f"--out {directory}", directory=True)
            destination = directory / log_file_name(loaded.transcripts)
        check_output(destination, f"--out {destination}", inputs=tuple(loaded.files))
    except ValueError as exc:  # OutputError included
        raise fail(str(exc)) from exc
    finished = datetime.fromtimestamp(source.stat().st_mtime, UTC)
    try:
        log = export_inspect_log(loaded.transcripts, destination, completed_at=finished)
    except OSError as exc:
        raise fail(f"the Inspect log could not be written: {exc}", FAILURE) from exc
    console.print(escape(loaded.describe()), soft_wrap=True, highlight=False)
    console.print(f"Wrote {len(loaded.transcripts)} audit(s) to [bold]{escape(str(log))}[/]", soft_wrap=True)
    console.print(f"Open it with: [bold]inspect view --log-dir {escape(str(log.parent))}[/]", soft_wrap=True)
