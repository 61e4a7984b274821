"""`auditrl sft --config FILE`: a warm-started base for a `grpo_lm` run, distilled from a teacher's audits or from
stored audits (`--from RUN`: an earlier run's, an API auditor's)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from auditrl.cli.errors import FAILURE, fail
from auditrl.cli.limits import call_limits, ready_models
from auditrl.cli.options import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    MaxRetriesOpt,
    TimeoutOpt,
    out_dir_option,
    random_seed_option,
)
from auditrl.cli.progress import stage_progress
from auditrl.configfile import ConfigFileError, validation_problems
from auditrl.models.limits import CallLimits
from auditrl.scaffold.transcript import Transcript

console = Console()


def sft(
    config: Annotated[Path, typer.Option("--config", "-c", help="The grpo_lm config the adapter will warm-start.")],
    out: Annotated[Path | None, out_dir_option("Output directory (default: runs/<name>-sft).")] = None,
    teacher: Annotated[
        str, typer.Option(help="Model string that plays the auditor (offline: scripted/teacher).")
    ] = "scripted/teacher",
    episodes: Annotated[int, typer.Option(help="Teacher audits drawn from the run's training distribution.")] = 256,
    epochs: Annotated[float, typer.Option(help="Passes over the kept audits.")] = 2.0,
    batch_size: Annotated[int, typer.Option(help="Audits per optimizer step.")] = 8,
    learning_rate: Annotated[float, typer.Option(help="Adapter learning rate (constant).")] = 5e-4,
    random_seed: Annotated[int, random_seed_option("the teacher's rows, data order and adapter init")] = 1,
    keep: Annotated[str, typer.Option(help="`parsed`: train only on audits whose report parsed; `all`.")] = "parsed",
    source: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help=(
                "Distil these stored audits instead of a teacher's: a run directory, a transcripts .jsonl file or "
                "a folder of them."
            ),
        ),
    ] = None,
    min_score: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=100.0,
            help="With --from: keep only audits the judge scored at least this (0-100: audit quality on planted "
            'targets, 100 for a right "nothing found" on benign ones).',
        ),
    ] = None,
    judge: Annotated[
        str | None,
        typer.Option(
            help="With --min-score: judge the audits that carry no verdict yet (`programmatic` or a model spec)."
        ),
    ] = None,
    max_retries: MaxRetriesOpt = DEFAULT_MAX_RETRIES,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
) -> None:
    """Distil a teacher's audits into a LoRA adapter on the auditor's own tokens (TRL's SFTTrainer); set
    `policy.init_adapter` to its `adapter/` directory to start GRPO from it. With `--from`, the audits are stored ones
    (an earlier run's, or an API auditor's from `auditrl audit`), distilled as they were prompted."""
    from auditrl.train.sft import SFTSettings

    try:
        settings = SFTSettings(
            teacher=teacher, episodes=episodes, epochs=epochs, batch_size=batch_size, learning_rate=learning_rate,
            seed=random_seed, keep=keep, teacher_calls=call_limits(max_retries, timeout),
        )  # fmt: skip
    except ValidationError as exc:
        raise fail(validation_problems(exc)) from exc
    from auditrl.models.roles import UnknownModelError, provider_of
    from auditrl.scaffold.store import read_audits
    from auditrl.train.config import check_plain, load_config
    from auditrl.train.sft import run_sft, run_sft_from

    if source is None and (min_score is not None or judge is not None):
        raise fail("--min-score and --judge filter stored audits; give them with --from RUN")
    if judge is not None and min_score is None:
        raise fail("--judge scores the audits --min-score filters; give --min-score too")
    try:
        cfg = load_config(config)
        check_plain(cfg, config, "auditrl sft")
        provider_of(teacher)
        audits = read_audits(source) if source is not None else []
    except (ConfigFileError, UnknownModelError, ValueError) as exc:
        raise fail(str(exc)) from exc
    if source is None:  # the teacher audits now: its key or weights are checked before the first audit
        ready_models({"--teacher": [teacher]}, settings.teacher_calls)
    if min_score is not None:
        audits = scored_at_least(audits, min_score, judge, settings.teacher_calls)

    directory = out or Path("runs") / f"{cfg.name}-sft"
    with stage_progress(console) as show:
        try:
            if source is None:
                record = run_sft(cfg, settings, directory, on_progress=show)
            else:
                record = run_sft_from(cfg, settings, audits, directory, str(source), on_progress=show)
        except ValueError as exc:
            raise fail(str(exc), FAILURE) from exc
    console.print(teacher_table(record))
    losses = record["loss"]
    if losses:
        console.print(f"training loss: {losses[0]['loss']:.3f} (step {losses[0]['step']}) -> {losses[-1]['loss']:.3f} "
                      f"(step {losses[-1]['step']}); {record['tokens']['trained']:,} of {record['tokens']['total']:,} "
                      "tokens trained (the auditor's own)", highlight=False)  # fmt: skip
    console.print(
        f"{record['cpu_seconds']['total']:.0f} CPU s ({record['cpu_seconds']['teacher']:.0f} of them before "
        "fine-tuning)"
    )
    console.print(f"adapter: [bold]{escape(record['adapter'])}[/bold]", soft_wrap=True)  # a path to copy: never wrapped
    console.print("Start GRPO from it with, in the config:", highlight=False)
    console.print(f"  policy:\n    init_adapter: {escape(record['adapter'])}", highlight=False, soft_wrap=True)


def scored_at_least(
    audits: list[Transcript], min_score: float, judge: str | None, limits: CallLimits
) -> list[Transcript]:
    """The audits whose suite score is at least `min_score`: audit quality (0-100) on a planted target, 100 for a
    right "nothing found" on a benign one (0 for a false accusation); an audit the judge has not scored is judged
    first with `judge`, and one it abstained on is left out."""
    import asyncio
    import math

    from auditrl.cli.evaluate import suite_judges
    from auditrl.evaluate.judging import judge_missing
    from auditrl.evaluate.metrics import audit_quality_value, false_positive_value

    if judge is not None:
        judges, _ = suite_judges(judge, None, None, 0, limits, seeds={})
        asyncio.run(judge_missing(audits, judges))
    kept = []
    for t in audits:
        value = false_positive_value(t) if t.benign else audit_quality_value(t)
        if value is not None and not math.isnan(value) and value >= min_score:
            kept.append(t)
    console.print(f"{len(kept)} of {len(audits)} stored audits scored at least {min_score:g}", highlight=False)
    return kept


def teacher_table(record: dict) -> Table:
    """What the teacher (or the stored audits) did on planted and benign targets: what the adapter imitates."""
    who = (
        f"audits from {escape(record['from'])}"
        if record.get("from")
        else f"teacher {escape(record['settings']['teacher'])}"
    )
    table = Table(
        title=f"{who}: {record['kept']} of {record['episodes']} audits kept ({record['examples']} training examples)"
    )
    for column in ("target", "audits", "failed", "valid reports", "claims", "reached trigger topic"):
        table.add_column(column, justify="left" if column == "target" else "right")
    for part, row in record["teacher"].items():
        reached = "-" if row["reached_trigger"] is None else str(row["reached_trigger"])
        table.add_row(part, *(str(row[k]) for k in ("audits", "failed", "valid_reports", "claims")), reached)
    return table
