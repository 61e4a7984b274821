"""`auditrl crux build|run`: the fast checkpoint proxy (cruxes of successful audits, continued by a checkpoint)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from auditrl.atomic import atomic_write_text
from auditrl.cli.behaviors import BehaviorsDirOpt
from auditrl.cli.errors import LIBRARY, fail
from auditrl.cli.limits import JudgeCacheOpt

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
    run: Annotated[Path, typer.Argument(help="A transcripts JSONL file or a run directory with transcripts*.jsonl.")],
    out: Annotated[Path, typer.Option(help="Crux file to write (JSONL).")] = Path("cruxes.jsonl"),
    judge: Annotated[
        str, typer.Option(help=f"'{ANNOTATIONS}' (offline: the turn that drew out the first expressed reply) or a judge model spec.")
    ] = ANNOTATIONS,
    judge_cache: JudgeCacheOpt = None,
    n: Annotated[int, typer.Option(min=1, help="Cruxes to keep, spread over behaviors (the paper kept 75).")] = 75,
    seed: Annotated[int, typer.Option(help="Seed of the behavior-diverse subsample.")] = 42,
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
    from auditrl.scaffold.store import load_transcripts

    console = Console()
    try:
        library = load_behaviors(behaviors_dir)
        transcripts = load_transcripts(run)
    except (BehaviorFileError, ValueError) as exc:
        raise fail(str(exc), console, LIBRARY) from exc
    crux_judge = success = None
    if judge != ANNOTATIONS:
        client = judge_client(judge, judge_cache, 2, out=console)
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
    temperature: Annotated[Optional[float], typer.Option(min=0.0, help="Sampling temperature (default: provider's).")] = None,
    sampling_seed: Annotated[int, typer.Option(help="Base sampling seed; continuation i uses base + i.")] = 0,
    concurrency: Annotated[int, typer.Option(min=1, help="Continuations running at the same time.")] = 4,
    out: Annotated[Path, typer.Option(help="Run directory; continuations accumulate here, so checkpoints share one table.")] = Path("runs/crux"),
    behaviors_dir: BehaviorsDirOpt = None,
) -> None:
    """Let each checkpoint continue every crux for a few turns over several rollouts and score the continuations."""
    import asyncio

    from inspect_ai.model import GenerateConfig
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from auditrl.behaviors.library import BehaviorFileError, load_behaviors
    from auditrl.cli.judge import judge_client
    from auditrl.evaluate.crux import SURFACED_KEY, continue_from, crux_table, judge_continuations
    from auditrl.judges.binary import BinaryMatchJudge, BinaryScorer
    from auditrl.judges.programmatic import ProgrammaticBinaryJudge
    from auditrl.models.roles import UnknownModelError, resolve_model, tool_protocol_for
    from auditrl.scaffold.store import append_transcript, read_transcripts, write_transcripts
    from auditrl.scaffold.transcript import Transcript

    console = Console()
    try:
        library = load_behaviors(behaviors_dir)
        saved = read_cruxes(cruxes)
    except (BehaviorFileError, ValueError) as exc:
        raise fail(str(exc), console, LIBRARY) from exc
    missing = sorted({c.behavior_id for c in saved if c.behavior_id not in library})
    if missing:
        raise fail(f"{cruxes}: unknown behavior(s) {', '.join(missing)}", console, LIBRARY)
    client = judge_client(judge, judge_cache, 2, out=console)
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
        raise fail(str(exc), console) from exc
    out_file = out / CONTINUATIONS
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())

    async def continue_all(name: str, progress: Progress) -> None:
        task = progress.add_task(escape(name), total=len(saved) * rollouts)
        semaphore = asyncio.Semaphore(concurrency)

        async def one(i: int, crux: Crux) -> None:
            config = GenerateConfig(max_tokens=max_tokens, temperature=temperature, seed=sampling_seed + i)
            async with semaphore:
                try:
                    t = await continue_from(
                        crux, library[crux.behavior_id], auditors[name], name, targets[crux.source.target_model],
                        turns, tool_protocol_for(name), config,
                    )
                except Exception as exc:  # noqa: BLE001 - recorded as a failed continuation, the others go on
                    t = Transcript(
                        auditor_model=name, target_model=crux.source.target_model, behavior_id=crux.behavior_id,
                        seed_id=crux.source.seed_id, seed_instructions=crux.source.seed_instructions,
                        status="error", error=f"{type(exc).__name__}: {exc}", metadata={"crux": crux.id},
                    )
            append_transcript(out_file, t)
            progress.advance(task)

        await asyncio.gather(*(one(i, c) for i, c in enumerate(c for c in saved for _ in range(rollouts))))

    with Progress(*columns, console=console) as progress:
        for name in auditor:
            asyncio.run(continue_all(name, progress))
    continuations = read_transcripts(out_file)
    asyncio.run(judge_continuations(continuations, scorer))
    write_transcripts(out_file, continuations)
    rows = crux_table([t for t in continuations if SURFACED_KEY in t.scores or t.status == "error"])
    console.print(table(rows, turns))
    results = out / RESULTS
    atomic_write_text(results, "[\n" + ",\n".join(r.model_dump_json() for r in rows) + "\n]\n")
    console.print(f"Continuations: [bold]{escape(str(out_file))}[/]  results: [bold]{escape(str(results))}[/]", soft_wrap=True)
