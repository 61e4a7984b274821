"""`auditrl judge pairwise|score`: run pairwise judges and reward designs over saved transcripts.

Besides a judge model spec, `--judge` takes any registered judge family (`auditrl.judges.registry`):
`programmatic`, the generic annotation judges for any annotated transcript, and `sim`, AuditWorld's
judges with their modelled weaknesses (the ones AuditWorld trains against), which score AuditWorld and
`sim/<family>` transcripts as AuditWorld does. `--design` takes any registered reward design.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from auditrl.atomic import OutputError, check_output
from auditrl.cli.errors import FAILURE, fail, finish
from auditrl.cli.limits import call_limits, print_failures, showing_retries
from auditrl.cli.options import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    FollowupsOpt,
    HtmlOpt,
    JsonOpt,
    JudgeCacheOpt,
    MaxRetriesOpt,
    TimeoutOpt,
    judge_option,
)
from auditrl.cli.outputs import ReportFiles, json_text, table_section, transcripts_part
from auditrl.judges.cache import JudgeCache
from auditrl.judges.registry import DEFAULT_FAMILY, JudgeFamily, judge_family_names, judge_spec_help, resolve_judges
from auditrl.judges.verdicts import PairwiseResult
from auditrl.models.limits import CallLimits
from auditrl.rewards.records import RewardDesign, RewardRecord
from auditrl.rewards.reference import ReferenceStore
from auditrl.rewards.registry import build_design, design_names, design_spec, designs_help
from auditrl.scaffold.store import TRANSCRIPTS, RunError, read_run, read_transcripts, scored_copy, write_transcripts
from auditrl.scaffold.transcript import Transcript
from auditrl.terminal import keep_whole

if TYPE_CHECKING:  # inspect-ai and scipy are imported when a command runs, so that a usage error answers at once
    from inspect_ai.model import Model

    from auditrl.judges.client import JudgeClient
    from auditrl.judges.pairwise import PairwiseJudgeLike

app = typer.Typer(help="Run judges and reward designs over transcripts.", no_args_is_help=True)
console = Console()
PROGRAMMATIC = DEFAULT_FAMILY


def not_scored_hint(reason: str) -> str | None:
    """What to do about a reason a rollout was not scored, printed after the count."""
    from auditrl.rewards.designs import GROUP_OF_ONE, IS_REFERENCE, NO_REFERENCE

    return {
        GROUP_OF_ONE: "run audit with --seed-id ID --rollouts N for groups",
        NO_REFERENCE: "give --references transcripts or a store that cover these seeds",
        IS_REFERENCE: "the references came from the scored transcripts; take them from another run",
    }.get(reason)


def resolve_judge(spec: str) -> Model:
    """The judge model for a spec string (kept as a seam so tests can script the judge)."""
    from auditrl.models.check import ready_model

    return ready_model(spec)


def _one_line(exc: BaseException) -> str:
    """An exception's message as one plain line (provider errors carry rich markup and blank lines)."""
    return " ".join(Text.from_markup(str(exc)).plain.split()) or type(exc).__name__


def judge_client(
    spec: str,
    cache: Path | None,
    followups: int,
    limits: CallLimits | None = None,
    *,
    option: str = "--judge",
) -> JudgeClient | None:
    """The client for a judge spec, None for `programmatic`; a spec that cannot be used exits with code 2.

    The other judge families (`sim`, ...) have no client and only the reward-design commands take them
    (see `judges_for`).
    """
    from auditrl.judges.client import JudgeClient

    if spec == PROGRAMMATIC:
        return None
    if spec in judge_family_names():
        raise fail(
            f"{option} {spec}: that judge family is offered only by `auditrl judge score|pairwise`; use "
            f"{PROGRAMMATIC} here"
        )
    try:
        model = resolve_judge(spec)
    except Exception as exc:  # any provider's failure to build the model is a configuration error here
        raise fail(f"{option} {spec}: {_one_line(exc)}") from exc
    try:
        if cache is not None:
            check_output(cache, f"--judge-cache {cache}")
        return JudgeClient(model, cache=JudgeCache(cache) if cache else None, max_retries=followups, limits=limits)
    except ValueError as exc:  # OutputError included
        raise fail(str(exc)) from exc


def judges_for(
    spec: str, cache: Path | None, followups: int, limits: CallLimits, extra_dimensions: Sequence[Path] = ()
) -> tuple[JudgeFamily, JudgeClient | None]:
    """The judge family of a spec (a registered family, else the judges on the model's client) and that client."""
    clients: list[JudgeClient] = []

    def connect(model_spec: str) -> JudgeClient:
        client = judge_client(model_spec, cache, followups, limits)
        assert client is not None  # judge_client returns None only for `programmatic`, a registered family
        clients.append(client)
        return client

    family = resolve_judges(spec, extra_dimensions=extra_dimensions, client=connect)
    return family, (clients[0] if clients else None)


def _source(path: Path) -> Path:
    file = path / TRANSCRIPTS if path.is_dir() else path
    if not file.is_file():
        raise fail(f"{file}: no such transcripts file (give a .jsonl file, an Inspect .eval log or a run directory)")
    return file


def _read(path: Path) -> list[Transcript]:
    try:
        transcripts = read_transcripts(path)
    except ValueError as exc:
        raise fail(str(exc)) from exc
    if not transcripts:
        raise fail(f"{path}: no transcripts in the file")
    return transcripts


async def _pairwise_all(
    planted: PairwiseJudgeLike, benign: PairwiseJudgeLike, pairs: Sequence[tuple[Transcript, Transcript]]
) -> list[PairwiseResult]:
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("judging pairs (both orders)", total=len(pairs))

        async def one(a: Transcript, b: Transcript) -> PairwiseResult:
            result = await (benign if a.benign else planted).compare(a, b)
            progress.advance(task)
            return result

        return list(await asyncio.gather(*(one(a, b) for a, b in pairs)))


@app.command()
def pairwise(
    a_file: Annotated[
        Path, typer.Argument(help="Transcripts of auditor A (a .jsonl file, Inspect .eval log or run directory).")
    ],
    b_file: Annotated[Path, typer.Argument(help="Transcripts of auditor B, paired with A by position.")],
    judge: Annotated[str, judge_option(judge_spec_help())],
    judge_cache: JudgeCacheOpt = None,
    followups: FollowupsOpt = 2,
    max_retries: MaxRetriesOpt = DEFAULT_MAX_RETRIES,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    html: HtmlOpt = None,
    json_out: JsonOpt = None,
) -> None:
    """Compare A[i] with B[i] in both orders; print each result, A's mean share and the position-bias rate."""
    from auditrl.judges.pairwise import position_bias
    from auditrl.stats import mean_ci

    sources = _source(a_file), _source(b_file)
    a_list, b_list = _read(sources[0]), _read(sources[1])
    if len(a_list) != len(b_list):
        raise fail(f"{a_file} has {len(a_list)} transcripts but {b_file} has {len(b_list)}")
    reports = ReportFiles(html, json_out)
    reports.check(sources)
    judges, client = judges_for(judge, judge_cache, followups, call_limits(max_retries, timeout))
    planted, benign = judges.pairwise(calibration=False), judges.pairwise(calibration=True)
    try:
        with showing_retries(console):
            results = asyncio.run(_pairwise_all(planted, benign, list(zip(a_list, b_list, strict=True))))
    except ValueError as exc:
        raise fail(str(exc)) from exc
    table = Table(title=f"Pairwise: {escape(a_file.name)} (A) vs {escape(b_file.name)} (B)")
    for column in ("#", "A id", "B id", "A first", "B first", "A's share", "orders agree"):
        table.add_column(column)
    for i, r in enumerate(results):
        first = "abstain" if r.first.abstained else f"{r.first.winner} ({r.first.confidence})"
        second = (
            "abstain" if r.second.abstained else f"{'A' if r.second.winner == 'B' else 'B'} ({r.second.confidence})"
        )
        share = "abstain" if r.share_a is None else f"{r.share_a:.2f}"
        agree = {"both": "yes" if r.consistent else "no", "neither": "-"}.get(
            r.orders, f"unchecked: {r.orders} answered"
        )
        table.add_row(str(i), escape(r.a_id), escape(r.b_id), first, second, share, agree)
    console.print(keep_whole(table, "A id", "B id"))
    shares = [r.share_a for r in results if r.share_a is not None]
    est = mean_ci(shares)
    bias = position_bias(results)
    abstained = len(results) - est.n
    summary = [
        (
            f"A's mean share: {est.mean:.2f} [95% CI {est.lo:.2f}, {est.hi:.2f}] over {est.n} comparisons "
            f"({abstained} abstained)"
        )
        if est.n
        else f"A's mean share: n/a (the judge abstained on all {abstained} comparisons)",
        f"position-bias rate: {bias.describe()}",
    ]
    for line in summary:
        console.print(line)
    if client is not None:
        console.print(client.meter.table())
        print_failures(console, "judge verdict(s)", client.failures.elements())
    reports.write(
        console,
        f"auditrl judge pairwise: {a_file.name} vs {b_file.name}",
        lambda: [table_section("Pairwise comparisons", [table], notes=summary)],
        lambda: json_text(
            {"a": sources[0], "b": sources[1], "judge": judge, "mean_share_a": est if est.n else None,
             "position_bias": bias, "results": results}
        ),
    )  # fmt: skip
    if client is not None:  # the exit-code rule: 1 with the count when a judge call failed (the report is kept)
        finish(client.failures.total(), client.asked, "judge verdict(s)")


def reward_groups(transcripts: Sequence[Transcript]) -> list[list[int]]:
    """Indices grouped by (behavior, seed, target family), groups and members in file order."""
    groups: dict[tuple[str | None, str, str | None], list[int]] = {}
    for i, t in enumerate(transcripts):
        groups.setdefault((t.behavior_id, t.seed_id, t.target_family), []).append(i)
    return list(groups.values())


async def _score_all(design: RewardDesign, transcripts: Sequence[Transcript]) -> list[RewardRecord | None]:
    records: list[RewardRecord | None] = [None] * len(transcripts)
    groups = reward_groups(transcripts)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"scoring groups with {design.name}", total=len(groups))
        for indices in groups:
            scored = await design.score_group([transcripts[i] for i in indices])
            for i, record in zip(indices, scored, strict=True):
                records[i] = record
            progress.advance(task)
    return records


def load_references(path: Path | None, design: str) -> ReferenceStore | None:
    """The references for a reference design: a store JSON, or transcripts whose first per (behavior, seed, family) is
    it.

    Other designs take none. Scoring saved transcripts never seeds references from the scored rollouts,
    which would compare a rollout with itself, so a reference design without references is an error.
    """
    if not design_spec(design).references:
        if path is not None:
            users = sorted(n for n in design_names() if design_spec(n).references)
            console.print(f"[yellow]--references is used only by {', '.join(users)}; ignored[/yellow]")
        return None
    if path is None:
        raise fail(
            f"{design} compares each rollout with a reference transcript of the same (behavior, seed, family): give "
            "--references FILE, a reference store (a training run's references.json) or transcripts of an "
            "earlier auditor (a .jsonl file or run directory)"
        )
    if not path.exists():
        raise fail(f"--references {path}: no such file or directory")
    try:
        if path.is_dir() or path.suffix == ".jsonl":
            store = ReferenceStore()
            store.replace(0, [t for t in read_run(path).transcripts if t.status != "error"])
            return store
        return ReferenceStore(path)
    except (RunError, ValueError) as exc:
        raise fail(f"--references {path}: {exc}") from exc


def _entry(record: RewardRecord | None) -> dict[str, object]:
    """The JSON entry stored under the design's name in `Transcript.scores`."""
    if record is None:
        return {"reward": None}
    return json.loads(json.dumps({"reward": record.reward, **record.details}, default=str))


def _print_unrewarded(records: Sequence[RewardRecord | None]) -> None:
    """Why rollouts have no reward: not scored (with what to do about it) apart from real judge abstentions."""
    reasons = Counter(r.not_scored for r in records if r is not None and r.not_scored)
    for reason, n in sorted(reasons.items()):
        hint = not_scored_hint(reason)
        console.print(
            f"[yellow]{n} rollout(s) not scored: {escape(reason)}"
            + (f" ({escape(hint)})" if hint else "")
            + "[/yellow]"
        )
    abstained = sum(1 for r in records if r is not None and r.reward is None and r.abstained)
    if abstained:
        console.print(
            f"[yellow]{abstained} rollout(s) without a reward: the judge abstained (reasons in the scored "
            "file)[/yellow]"
        )


@app.command()
def score(
    run: Annotated[Path, typer.Argument(help="A run directory holding transcripts.jsonl, or a .jsonl file.")],
    design: Annotated[str, typer.Option("--design", help=f"A registered reward design: {designs_help()}.")],
    judge: Annotated[str, judge_option(judge_spec_help())],
    judge_cache: JudgeCacheOpt = None,
    references: Annotated[
        Path | None,
        typer.Option(
            help="Required by reference_pairwise: a reference store (JSON, e.g. a training run's references.json) or "
            "transcripts of an earlier auditor (.jsonl or run directory; the first per behavior, seed and "
            "family is the reference)."
        ),
    ] = None,
    extra_dimensions: Annotated[
        list[Path], typer.Option("--dimensions", help="Petri dimension files or folders.")
    ] = [],  # noqa: B006 - typer needs a literal default
    followups: FollowupsOpt = 2,
    max_retries: MaxRetriesOpt = DEFAULT_MAX_RETRIES,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    html: HtmlOpt = None,
    json_out: JsonOpt = None,
) -> None:
    """Score every group with a reward design; write the scores to a new JSONL beside the input.

    Rollouts are grouped by (behavior, seed, target family), in file order. The in-group designs
    (ingroup_pairwise, ingroup_bradley_terry) compare the rollouts of a group with each other, so a group
    needs at least 2: `auditrl audit` cycles through seeds, one rollout each, so run it with
    `--seed-id ID --rollouts N` to get N rollouts of one seed; a group of 1 is reported as not scored.
    reference_pairwise compares each rollout with the reference of its (behavior, seed, family) from --references.
    """
    from auditrl.stats import mean_ci

    if design not in design_names():
        raise fail(f"unknown reward design {design!r}; choose one of {', '.join(design_names())}")
    source = _source(run)
    transcripts = _read(source)
    out = scored_copy(source, design)
    try:
        check_output(out, f"the scored copy {out}", inputs=(source,))
    except OutputError as exc:
        raise fail(str(exc)) from exc
    reports = ReportFiles(html, json_out)
    reports.check((source, out))
    store = load_references(references, design)
    judges, client = judges_for(judge, judge_cache, followups, call_limits(max_retries, timeout), extra_dimensions)
    try:
        built = build_design(design, judges, references=store)
        with showing_retries(console):
            records = asyncio.run(_score_all(built, transcripts))
    except ValueError as exc:
        raise fail(str(exc)) from exc
    scored = [
        t.model_copy(update={"scores": {**t.scores, design: _entry(record)}})
        for t, record in zip(transcripts, records, strict=True)
    ]
    try:
        write_transcripts(out, scored)
    except OSError as exc:
        raise fail(
            f"the scored copy {out} could not be written ({exc.strerror or exc}); {source} is unchanged", FAILURE
        ) from exc
    rewards = [r.reward for r in records if r is not None and r.reward is not None]
    est = mean_ci(rewards)
    line = (
        f"design {design}: mean reward {est.mean:.3f} [95% CI {est.lo:.3f}, {est.hi:.3f}] over {est.n} of "
        f"{len(transcripts)} rollouts"
        if est.n
        else f"design {design}: no rollout scored (of {len(transcripts)})"
    )
    console.print(line)
    _print_unrewarded(records)
    if client is not None:
        total = client.meter.total()
        console.print(f"judge calls: {total.calls} (cache hits {total.cache_hits}), tokens: {total.tokens}")
        console.print(client.meter.table())
        print_failures(console, "judge verdict(s)", client.failures.elements())
    console.print(f"wrote {escape(str(out))}", highlight=False, soft_wrap=True)
    reports.write(
        console,
        f"auditrl judge score: {design} on {source.name}",
        lambda: [table_section(f"Reward design {design}", [], notes=[line]), transcripts_part(scored)],
        lambda: json_text(
            {
                "design": design,
                "judge": judge,
                "transcripts": source,
                "scored_copy": out,
                "mean_reward": est if est.n else None,
                "rollouts": [{"id": t.id, **_entry(r)} for t, r in zip(transcripts, records, strict=True)],
            }
        ),
    )
    if client is not None:  # the exit-code rule: 1 with the count when a judge call failed (the report is kept)
        finish(client.failures.total(), client.asked, "judge verdict(s)")
