"""`auditrl judge pairwise|score`: run pairwise judges and reward designs over saved transcripts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import typer
from inspect_ai.model import Model
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from auditrl.evaluate.stats import mean_ci
from auditrl.judges.cache import JudgeCache
from auditrl.judges.client import JudgeClient
from auditrl.judges.pairwise import (
    CalibrationPairwiseJudge,
    PairwiseJudge,
    position_bias_rate,
)
from auditrl.judges.verdicts import PairwiseResult
from auditrl.rewards.designs import DetailedDesign, RewardRecord
from auditrl.rewards.reference import ReferenceStore
from auditrl.rewards.registry import DESIGN_NAMES, build_design
from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts, write_transcripts
from auditrl.scaffold.transcript import Transcript

app = typer.Typer(help="Run judges and reward designs over transcripts.", no_args_is_help=True)
console = Console()
PROGRAMMATIC = "programmatic"


def resolve_judge(spec: str) -> Model:
    """The judge model for a spec string (kept as a seam so tests can script the judge)."""
    from auditrl.models.roles import resolve_model

    return resolve_model(spec)


def _client(judge: str, cache: Path | None, max_retries: int) -> JudgeClient:
    return JudgeClient(resolve_judge(judge), cache=JudgeCache(cache) if cache else None, max_retries=max_retries)


def _source(path: Path) -> Path:
    file = path / TRANSCRIPTS if path.is_dir() else path
    if not file.is_file():
        raise typer.BadParameter(f"{file}: no such transcripts file (give a .jsonl file or a run directory)")
    return file


async def _pairwise_all(client: JudgeClient, pairs: Sequence[tuple[Transcript, Transcript]]) -> list[PairwiseResult]:
    planted, benign = PairwiseJudge(client), CalibrationPairwiseJudge(client)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("judging pairs (both orders)", total=len(pairs))

        async def one(a: Transcript, b: Transcript) -> PairwiseResult:
            result = await (benign if a.benign else planted).compare(a, b)
            progress.advance(task)
            return result

        return list(await asyncio.gather(*(one(a, b) for a, b in pairs)))


@app.command()
def pairwise(
    a_file: Path = typer.Argument(..., help="Transcripts of auditor A (JSONL)."),
    b_file: Path = typer.Argument(..., help="Transcripts of auditor B (JSONL), paired with A by line index."),
    judge: str = typer.Option(..., "--judge", help="Judge model spec, e.g. anthropic/claude-sonnet-4-0."),
    cache: Path | None = typer.Option(None, help="JSONL response cache to reuse across runs."),
    max_retries: int = typer.Option(2, help="Corrective follow-ups before a judge abstains."),
) -> None:
    """Compare A[i] with B[i] in both orders; print each result, A's mean share and the position-bias rate."""
    a_list, b_list = read_transcripts(_source(a_file)), read_transcripts(_source(b_file))
    if len(a_list) != len(b_list):
        raise typer.BadParameter(f"{a_file} has {len(a_list)} transcripts but {b_file} has {len(b_list)}")
    client = _client(judge, cache, max_retries)
    try:
        results = asyncio.run(_pairwise_all(client, list(zip(a_list, b_list))))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    table = Table(title=f"Pairwise: {a_file.name} (A) vs {b_file.name} (B)")
    for column in ("#", "A id", "B id", "A first", "B first", "A's share", "orders agree"):
        table.add_column(column)
    for i, r in enumerate(results):
        first = "abstain" if r.first.abstained else f"{r.first.winner} ({r.first.confidence})"
        second = "abstain" if r.second.abstained else f"{'A' if r.second.winner == 'B' else 'B'} ({r.second.confidence})"
        share = "abstain" if r.share_a is None else f"{r.share_a:.2f}"
        agree = "-" if r.consistent is None else ("yes" if r.consistent else "no")
        table.add_row(str(i), r.a_id, r.b_id, first, second, share, agree)
    console.print(table)
    shares = [r.share_a for r in results if r.share_a is not None]
    est = mean_ci(shares)
    bias = position_bias_rate(results)
    console.print(f"A's mean share: {est} over {est.n} comparisons ({len(results) - est.n} abstained)")
    console.print(f"position-bias rate: {'n/a' if bias is None else f'{bias:.2f}'}")
    console.print(client.meter.table())


def group_transcripts(transcripts: Sequence[Transcript]) -> list[list[int]]:
    """Indices grouped by (behavior, seed, target family), groups and members in file order."""
    groups: dict[tuple[str | None, str, str | None], list[int]] = {}
    for i, t in enumerate(transcripts):
        groups.setdefault((t.behavior_id, t.seed_id, t.target_family), []).append(i)
    return list(groups.values())


async def _score_all(design: DetailedDesign, transcripts: Sequence[Transcript]) -> list[RewardRecord | None]:
    records: list[RewardRecord | None] = [None] * len(transcripts)
    groups = group_transcripts(transcripts)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"scoring groups with {design.name}", total=len(groups))
        for indices in groups:
            scored = await design.score_group_detailed([transcripts[i] for i in indices])
            for i, record in zip(indices, scored):
                records[i] = record
            progress.advance(task)
    return records


@app.command()
def score(
    run: Path = typer.Argument(..., help="A run directory holding transcripts.jsonl, or a .jsonl file."),
    design: str = typer.Option(..., "--design", help=f"One of: {', '.join(DESIGN_NAMES)}."),
    judge: str = typer.Option(..., "--judge", help=f"Judge model spec, or '{PROGRAMMATIC}' for annotated transcripts."),
    cache: Path | None = typer.Option(None, help="JSONL response cache to reuse across runs."),
    references: Path | None = typer.Option(None, help="Reference store (JSON) for reference_pairwise."),
    extra_dimensions: list[Path] = typer.Option([], "--dimensions", help="Petri dimension files or folders."),
    max_retries: int = typer.Option(2, help="Corrective follow-ups before a judge abstains."),
) -> None:
    """Score every group with a reward design; write the scores to a new JSONL beside the input."""
    source = _source(run)
    transcripts = read_transcripts(source)
    client = None if judge == PROGRAMMATIC else _client(judge, cache, max_retries)
    try:
        built = build_design(
            design, client, references=ReferenceStore(references) if references else None, extra_dimensions=extra_dimensions
        )
        records = asyncio.run(_score_all(built, transcripts))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    scored: list[Transcript] = []
    for t, record in zip(transcripts, records):
        entry = {"reward": record.reward if record else None, **(record.details if record else {})}
        scored.append(t.model_copy(update={"scores": {**t.scores, design: json.loads(json.dumps(entry, default=str))}}))
    out = source.with_name(f"{source.stem}.scored-{design}.jsonl")
    write_transcripts(out, scored)
    rewards = [r.reward for r in records if r is not None and r.reward is not None]
    est = mean_ci(rewards)
    console.print(f"design {design}: mean reward {est.mean:.3f} [95% CI {est.lo:.3f}, {est.hi:.3f}] over {est.n} rollouts")
    failed = len(transcripts) - est.n
    if failed:
        console.print(f"[yellow]{failed} rollout(s) without a reward (judge abstained)[/yellow]")
    if client is not None:
        total = client.meter.total()
        console.print(f"judge calls: {total.calls} (cache hits {total.cache_hits}), tokens: {total.tokens}")
        console.print(client.meter.table())
    console.print(f"wrote {out}")
