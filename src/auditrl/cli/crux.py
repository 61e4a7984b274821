"""`auditrl crux build|run`: the fast checkpoint proxy (cruxes of successful audits, continued by a checkpoint)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from auditrl.atomic import atomic_write_text, check_output
from auditrl.cli.errors import FAILURE, fail, finish, warn
from auditrl.cli.limits import call_limits, opened_run, print_failures, ready_models, showing_retries
from auditrl.cli.options import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    PROGRAMMATIC,
    AuditorPromptOpt,
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
from auditrl.terminal import keep_whole

if TYPE_CHECKING:
    from rich.table import Table

    from auditrl.evaluate.crux import Crux, CruxRow

app = typer.Typer(no_args_is_help=True, help="Crux evaluation: a fast proxy for choosing checkpoints.")
CRUXES = "cruxes.jsonl"
CONTINUATIONS = "continuations.jsonl"
RESULTS = "crux.json"
DEFAULT_DIR = Path("runs/crux")


def crux_file(path: Path) -> Path:
    """The crux file given, or the one `crux build` wrote into the directory given."""
    return path / CRUXES if path.is_dir() else path


def read_cruxes(path: Path) -> list[Crux]:
    from pydantic import ValidationError

    from auditrl.evaluate.crux import Crux

    if not path.is_file():
        raise ValueError(f"no crux file at {path} (give a crux file or the --out directory of `auditrl crux build`)")
    cruxes = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                cruxes.append(Crux.model_validate_json(line))
            except ValidationError as exc:
                first = exc.errors()[0]
                raise ValueError(
                    f"{path}:{number}: field '{'.'.join(map(str, first['loc']))}': {first['msg']}"
                ) from exc
    return cruxes


def table(rows: list[CruxRow], turns: int) -> Table:
    from rich.table import Table

    out = Table(title=f"Crux evaluation: behavior surfaced within {turns} turn(s) of the crux")
    out.add_column("auditor")
    for name in ("surfaced % [95% CI]", "cruxes", "continuations", "failed", "abstained"):
        out.add_column(name, justify="right")
    for r in rows:
        out.add_row(
            escape(r.auditor), str(r.detection), str(r.cruxes), str(r.continuations), str(r.failed), str(r.abstained)
        )
    return keep_whole(out, "auditor")


@app.command()
def build(
    run: Annotated[
        Path, typer.Argument(help="A transcripts file, or a run directory (its transcripts.jsonl and those below it).")
    ],
    out: Annotated[
        Path, out_dir_option(f"Directory the crux file ({CRUXES}) is written in, where `crux run` reads it.")
    ] = DEFAULT_DIR,
    judge: Annotated[
        str,
        judge_option(
            f"'{PROGRAMMATIC}' (offline: the turn that drew out the target's first expressed reply) or a judge "
            "model spec."
        ),
    ] = PROGRAMMATIC,
    judge_cache: JudgeCacheOpt = None,
    n: Annotated[int, typer.Option(min=1, help="Cruxes to keep, spread over behaviors (the paper kept 75).")] = 75,
    random_seed: Annotated[int, random_seed_option("the behavior-diverse subsample")] = 42,
    behaviors_dir: BehaviorsDirOpt = None,
    max_retries: MaxRetriesOpt = DEFAULT_MAX_RETRIES,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
) -> None:
    """Find the crux of every successful planted audit in a pool of transcripts and keep a behavior-diverse set."""
    import asyncio

    from rich.progress import Progress

    from auditrl.behaviors.library import BehaviorFileError, load_behaviors
    from auditrl.cli.judge import judge_client
    from auditrl.evaluate.crux import build_cruxes, select_cruxes
    from auditrl.judges.binary import BinaryMatchJudge
    from auditrl.judges.crux import CruxJudge
    from auditrl.scaffold.store import read_run

    console = Console()
    target = out / CRUXES
    if out.suffix == ".jsonl":
        warn(
            f"`auditrl crux build --out {out}` (a crux file) is deprecated and will be removed: --out is the directory "
            f"{CRUXES} is written in; writing this file as before"
        )
        target = out
    try:
        library = load_behaviors(behaviors_dir)
        loaded = read_run(run)
        check_output(target, f"--out {target}", inputs=tuple(loaded.files))
    except (BehaviorFileError, ValueError) as exc:  # RunError and OutputError included
        raise fail(str(exc)) from exc
    transcripts = loaded.transcripts
    console.print(escape(loaded.describe()), soft_wrap=True, highlight=False)
    crux_judge = success = None
    client = judge_client(judge, judge_cache, 2, call_limits(max_retries, timeout))
    if client is not None:
        crux_judge, success = CruxJudge(client), BinaryMatchJudge(client)
    with Progress(console=console, transient=True) as progress, showing_retries(console):
        task = progress.add_task("finding cruxes", total=len(transcripts))
        found = asyncio.run(build_cruxes(transcripts, library, crux_judge, success, lambda: progress.advance(task)))
    kept = select_cruxes(found, n, random_seed)
    atomic_write_text(target, "".join(c.model_dump_json() + "\n" for c in kept))
    behaviors = sorted({c.behavior_id for c in kept})
    console.print(
        f"{len(found)} crux(es) in {len(transcripts)} transcript(s) (found by {escape(judge)}); kept {len(kept)} "
        f"over {len(behaviors)} behavior(s) in [bold]{escape(str(target))}[/]",
        soft_wrap=True,
    )
    if client is not None:
        print_failures(console, "judge verdict(s)", client.failures.elements())


@app.command("run")
def run_cruxes(
    cruxes: Annotated[
        Path, typer.Argument(help=f"A crux file, or the directory `auditrl crux build` wrote its {CRUXES} in.")
    ],
    auditor: Annotated[
        list[str], typer.Option(help="Checkpoint to score (repeatable): any model string, e.g. local/<adapter-dir>.")
    ],
    rollouts: Annotated[int, typer.Option(min=1, help="Continuations per crux (the paper used 10).")] = 10,
    max_turns: Annotated[int, max_turns_option("Auditor turns played from the crux on (the paper used 5).")] = 5,
    judge: Annotated[
        str, judge_option(f"Binary judge: a model spec, or '{PROGRAMMATIC}' (target annotations: an expressed reply).")
    ] = PROGRAMMATIC,
    judge_cache: JudgeCacheOpt = None,
    max_tokens: MaxTokensOpt = None,
    temperature: TemperatureOpt = None,
    random_seed: Annotated[int, random_seed_option("model sampling; continuation i uses this + i")] = 0,
    concurrency: Annotated[int, concurrency_option("Continuations running")] = 4,
    auditor_prompt: AuditorPromptOpt = "full",
    out: Annotated[
        Path, out_dir_option("Run directory; continuations accumulate here, so checkpoints share one table.")
    ] = DEFAULT_DIR,
    on_existing: OnExistingOpt = "resume",
    behaviors_dir: BehaviorsDirOpt = None,
    max_retries: MaxRetriesOpt = DEFAULT_MAX_RETRIES,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    html: HtmlOpt = None,
    json_out: JsonOpt = None,
) -> None:
    """Let each checkpoint continue every crux for a few turns over several rollouts and score the continuations."""
    import asyncio

    from inspect_ai.model import GenerateConfig

    from auditrl.behaviors.library import BehaviorFileError, load_behaviors
    from auditrl.cli.judge import judge_client
    from auditrl.evaluate.crux import continuation_spec, continue_from, crux_table, judge_continuations
    from auditrl.judges.binary import BinaryMatchJudge, BinaryScorer
    from auditrl.judges.programmatic import ProgrammaticBinaryJudge
    from auditrl.models.roles import tool_protocol_for
    from auditrl.scaffold.runner import AuditJob, RunStopped, run_audits
    from auditrl.scaffold.store import read_transcripts, write_transcripts
    from auditrl.scaffold.transcript_keys import CRUX, CRUX_BINARY

    console = Console()
    source = crux_file(cruxes)
    try:
        library = load_behaviors(behaviors_dir)
        saved = read_cruxes(source)
    except (BehaviorFileError, ValueError) as exc:
        raise fail(str(exc)) from exc
    missing = sorted({c.behavior_id for c in saved if c.behavior_id not in library})
    if missing:
        raise fail(f"{source}: unknown behavior(s) {', '.join(missing)}")
    reports = ReportFiles(html, json_out)
    reports.check((source, out / CONTINUATIONS))
    limits = call_limits(max_retries, timeout)
    client = judge_client(judge, judge_cache, 2, limits)
    # continuations stop at the turn budget, usually before a report: ask whether the target demonstrated it
    scorer: BinaryScorer = (
        ProgrammaticBinaryJudge(strict=True, needs_report=False)
        if client is None
        else BinaryMatchJudge(client, strict=True, needs_report=False)
    )
    saved_targets = sorted({c.source.target_model for c in saved})
    models = ready_models({f"{source}: target": saved_targets, "--auditor": auditor}, limits)
    targets, auditors = models, models
    log = opened_run(out / CONTINUATIONS, on_existing)

    def job(name: str, crux: Crux, rollout: int, index: int) -> AuditJob:
        protocol = tool_protocol_for(name)

        def run(config: GenerateConfig) -> Any:
            behavior, target = library[crux.behavior_id], targets[crux.source.target_model]
            return continue_from(
                crux, behavior, auditors[name], name, target, max_turns, protocol, config, auditor_prompt=auditor_prompt
            )

        spec = continuation_spec(
            crux.source, library[crux.behavior_id], crux.turn, max_turns, name, protocol, auditor_prompt
        )
        return AuditJob(spec, run, rollout, {CRUX: crux.id}, sampling_seed=random_seed + index)

    config = GenerateConfig(max_tokens=max_tokens, temperature=temperature)
    added = 0
    for name in auditor:
        pairs = [(c, r) for c in saved for r in range(rollouts)]
        jobs = log.plan([job(name, c, r, i) for i, (c, r) in enumerate(pairs)])
        if (existing := log.describe()) is not None:
            console.print(f"[yellow]{escape(existing)}[/]", soft_wrap=True)
        added += len(jobs)
        try:
            with showing_retries(console):
                outcomes = asyncio.run(
                    run_audits(jobs, log, concurrency=concurrency, config=config, console=console, label=escape(name))
                )
        except RunStopped as exc:
            raise fail(f"{exc}; run the same command again to resume", FAILURE) from exc
        print_failures(console, "continuation(s)", outcomes.errors)
    out_file = log.path
    continuations = read_transcripts(out_file)
    with showing_retries(console):
        asyncio.run(judge_continuations(continuations, scorer))
    if client is not None:
        print_failures(console, "judge verdict(s)", client.failures.elements())
    write_transcripts(out_file, continuations)
    rows = crux_table([t for t in continuations if CRUX_BINARY in t.scores or t.status == "error"])
    shown = table(rows, max_turns)
    console.print(shown)
    results = out / RESULTS
    atomic_write_text(results, "[\n" + ",\n".join(r.model_dump_json() for r in rows) + "\n]\n")
    console.print(
        f"Continuations: [bold]{escape(str(out_file))}[/] (added {added})  results: [bold]{escape(str(results))}[/]",
        soft_wrap=True,
    )
    reports.write(
        console,
        f"auditrl crux run: {source}",
        lambda: [table_section("Crux evaluation", [shown]), transcripts_part(continuations)],
        lambda: json_text(rows),
    )
    finish(sum(t.status == "error" for t in continuations), len(continuations), "continuation(s)")
