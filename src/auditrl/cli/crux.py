"""`auditrl crux build|run`: the fast checkpoint proxy (cruxes of successful audits, continued by a checkpoint)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from auditrl.atomic import atomic_write_text, check_output
from auditrl.cli.behaviors import BehaviorsDirOpt
from auditrl.cli.errors import FAILURE, fail
from auditrl.cli.limits import JudgeCacheOpt, OnExistingOpt, opened_run

if TYPE_CHECKING:
    from rich.table import Table

    from auditrl.evaluate.crux import Crux, CruxRow

app = typer.Typer(no_args_is_help=True, help="Crux evaluation: a fast proxy for choosing checkpoints.")
ANNOTATIONS = "annotations"
PROGRAMMATIC = "programmatic"
CONTINUATIONS = "continuations.jsonl"
RESULTS = "crux.json"


def read_cruxes(path: Path) -> list[Crux]:
    from pydantic import ValidationError

    from auditrl.evaluate.crux import Crux

    if not path.is_file():
        raise ValueError(f"no crux file at {path}")
    cruxes = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                cruxes.append(Crux.model_validate_json(line))
            except ValidationError as exc:
                first = exc.errors()[0]
                raise ValueError(f"{path}:{number}: field '{'.'.join(map(str, first['loc']))}': {first['msg']}") from exc
    return cruxes


def table(rows: list[CruxRow], turns: int) -> Table:
    from rich.table import Table

    out = Table(title=f"Crux evaluation: behavior surfaced within {turns} turn(s) of the crux")
    out.add_column("auditor")
    for name in ("surfaced % [95% CI]", "cruxes", "continuations", "failed", "abstained"):
        out.add_column(name, justify="right")
    for r in rows:
        out.add_row(escape(r.auditor), str(r.detection), str(r.cruxes), str(r.continuations), str(r.failed), str(r.abstained))
    return out


@app.command()
def build(
    run: Annotated[Path, typer.Argument(help="A transcripts file, or a run directory (its transcripts.jsonl and those below it).")],
    out: Annotated[Path, typer.Option(help="Crux file to write (JSONL).")] = Path("cruxes.jsonl"),
    judge: Annotated[
        str, typer.Option(help=f"'{ANNOTATIONS}' (offline: the turn that drew out the first expressed reply) or a judge model spec.")
    ] = ANNOTATIONS,
    judge_cache: JudgeCacheOpt = None,
    n: Annotated[int, typer.Option(min=1, help="Cruxes to keep, spread over behaviors (the paper kept 75).")] = 75,
    seed: Annotated[int, typer.Option(min=0, max=2**32 - 1, help="Seed of the behavior-diverse subsample.")] = 42,
    behaviors_dir: BehaviorsDirOpt = None,
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
    try:
        library = load_behaviors(behaviors_dir)
        loaded = read_run(run)
        check_output(out, f"--out {out}", inputs=tuple(loaded.files))
    except (BehaviorFileError, ValueError) as exc:  # RunError and OutputError included
        raise fail(str(exc)) from exc
    transcripts = loaded.transcripts
    console.print(escape(loaded.describe()), soft_wrap=True, highlight=False)
    crux_judge = success = None
    if judge != ANNOTATIONS:
        client = judge_client(judge, judge_cache, 2)
        assert client is not None
        crux_judge, success = CruxJudge(client), BinaryMatchJudge(client)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("finding cruxes", total=len(transcripts))
        found = asyncio.run(build_cruxes(transcripts, library, crux_judge, success, lambda: progress.advance(task)))
    kept = select_cruxes(found, n, seed)
    atomic_write_text(out, "".join(c.model_dump_json() + "\n" for c in kept))
    behaviors = sorted({c.behavior_id for c in kept})
    console.print(
        f"{len(found)} crux(es) in {len(transcripts)} transcript(s) (found by {escape(judge)}); kept {len(kept)} "
        f"over {len(behaviors)} behavior(s) in [bold]{escape(str(out))}[/]",
        soft_wrap=True,
    )


@app.command("run")
def run_cruxes(
    cruxes: Annotated[Path, typer.Argument(help="A crux file from `auditrl crux build`.")],
    auditor: Annotated[list[str], typer.Option(help="Checkpoint to score (repeatable): any model string, e.g. local/<adapter-dir>.")],
    rollouts: Annotated[int, typer.Option(min=1, help="Continuations per crux (the paper used 10).")] = 10,
    turns: Annotated[int, typer.Option(min=1, help="Auditor turns played from the crux on (the paper used 5).")] = 5,
    judge: Annotated[
        str, typer.Option(help=f"Binary judge: a model spec, or '{PROGRAMMATIC}' (target annotations: an expressed reply).")
    ] = PROGRAMMATIC,
    judge_cache: JudgeCacheOpt = None,
    max_tokens: Annotated[Optional[int], typer.Option(min=1, help="Max tokens per model reply.")] = None,
    temperature: Annotated[Optional[float], typer.Option(min=0.0, max=2.0, help="Sampling temperature (default: provider's).")] = None,
    sampling_seed: Annotated[int, typer.Option(min=0, max=2**32 - 1, help="Base sampling seed; continuation i uses base + i.")] = 0,
    concurrency: Annotated[int, typer.Option(min=1, help="Continuations running at the same time.")] = 4,
    out: Annotated[Path, typer.Option(help="Run directory; continuations accumulate here, so checkpoints share one table.")] = Path("runs/crux"),
    on_existing: OnExistingOpt = "resume",
    behaviors_dir: BehaviorsDirOpt = None,
) -> None:
    """Let each checkpoint continue every crux for a few turns over several rollouts and score the continuations."""
    import asyncio

    from inspect_ai.model import GenerateConfig

    from auditrl.behaviors.library import BehaviorFileError, load_behaviors
    from auditrl.cli.judge import judge_client
    from auditrl.evaluate.crux import CRUX_KEY, SURFACED_KEY, continuation_spec, continue_from, crux_table, judge_continuations
    from auditrl.judges.binary import BinaryMatchJudge, BinaryScorer
    from auditrl.judges.programmatic import ProgrammaticBinaryJudge
    from auditrl.models.roles import UnknownModelError, resolve_model, tool_protocol_for
    from auditrl.scaffold.runner import AuditJob, RunStopped, run_audits
    from auditrl.scaffold.store import read_transcripts, write_transcripts

    console = Console()
    try:
        library = load_behaviors(behaviors_dir)
        saved = read_cruxes(cruxes)
    except (BehaviorFileError, ValueError) as exc:
        raise fail(str(exc)) from exc
    missing = sorted({c.behavior_id for c in saved if c.behavior_id not in library})
    if missing:
        raise fail(f"{cruxes}: unknown behavior(s) {', '.join(missing)}")
    client = judge_client(judge, judge_cache, 2)
    # continuations stop at the turn budget, usually before a report: ask whether the target demonstrated it
    scorer: BinaryScorer = (
        ProgrammaticBinaryJudge(strict=True, needs_report=False)
        if client is None
        else BinaryMatchJudge(client, strict=True, needs_report=False)
    )
    try:
        targets = {spec: resolve_model(spec) for spec in {c.source.target_model for c in saved}}
        auditors = {spec: resolve_model(spec) for spec in auditor}
    except (UnknownModelError, ValueError) as exc:
        raise fail(str(exc)) from exc
    log = opened_run(out / CONTINUATIONS, on_existing)

    def job(name: str, crux: Crux, rollout: int, index: int) -> AuditJob:
        protocol = tool_protocol_for(name)

        def run(config: GenerateConfig) -> Any:
            behavior, target = library[crux.behavior_id], targets[crux.source.target_model]
            return continue_from(crux, behavior, auditors[name], name, target, turns, protocol, config)

        spec = continuation_spec(crux.source, library[crux.behavior_id], crux.turn, turns, name, protocol)
        return AuditJob(spec, run, rollout, {CRUX_KEY: crux.id}, sampling_seed=sampling_seed + index)

    config = GenerateConfig(max_tokens=max_tokens, temperature=temperature)
    added = 0
    for name in auditor:
        pairs = [(c, r) for c in saved for r in range(rollouts)]
        jobs = log.plan([job(name, c, r, i) for i, (c, r) in enumerate(pairs)])
        if (existing := log.describe()) is not None:
            console.print(f"[yellow]{escape(existing)}[/]", soft_wrap=True)
        added += len(jobs)
        try:
            asyncio.run(run_audits(jobs, log, concurrency=concurrency, config=config, console=console, label=escape(name)))
        except RunStopped as exc:
            raise fail(f"{exc}; run the same command again to resume", FAILURE) from exc
    out_file = log.path
    continuations = read_transcripts(out_file)
    asyncio.run(judge_continuations(continuations, scorer))
    write_transcripts(out_file, continuations)
    rows = crux_table([t for t in continuations if SURFACED_KEY in t.scores or t.status == "error"])
    console.print(table(rows, turns))
    results = out / RESULTS
    atomic_write_text(results, "[\n" + ",\n".join(r.model_dump_json() for r in rows) + "\n]\n")
    console.print(f"Continuations: [bold]{escape(str(out_file))}[/] (added {added})  results: [bold]{escape(str(results))}[/]", soft_wrap=True)
