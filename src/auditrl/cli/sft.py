"""`auditrl sft --config FILE`: a warm-started base for a `grpo_lm` run, distilled from a teacher's audits."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from auditrl.cli.errors import FAILURE, fail
from auditrl.cli.limits import call_limits
from auditrl.cli.options import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S, MaxRetriesOpt, TimeoutOpt, out_dir_option, random_seed_option
from auditrl.cli.progress import stage_progress
from auditrl.configfile import validation_problems
from auditrl.train.config import ConfigFileError

console = Console()


def sft(
    config: Annotated[Path, typer.Option("--config", "-c", help="The grpo_lm config the adapter will warm-start.")],
    out: Annotated[Optional[Path], out_dir_option("Output directory (default: runs/<name>-sft).")] = None,
    teacher: Annotated[str, typer.Option(help="Model string that plays the auditor (offline: scripted/teacher).")] = "scripted/teacher",
    episodes: Annotated[int, typer.Option(help="Teacher audits drawn from the run's training distribution.")] = 256,
    epochs: Annotated[float, typer.Option(help="Passes over the kept audits.")] = 2.0,
    batch_size: Annotated[int, typer.Option(help="Audits per optimizer step.")] = 8,
    learning_rate: Annotated[float, typer.Option(help="Adapter learning rate (constant).")] = 5e-4,
    random_seed: Annotated[int, random_seed_option("the teacher's rows, data order and adapter init")] = 1,
    keep: Annotated[str, typer.Option(help="`parsed`: train only on audits whose report parsed; `all`.")] = "parsed",
    finding_repeats: Annotated[int, typer.Option(help="Times an audit whose report identifies the planted behavior is trained on per epoch.")] = 1,
    verdict_weight: Annotated[float, typer.Option(help="Loss weight of each report's verdict word (1: every trained token alike).")] = 1.0,
    claim_weight: Annotated[Optional[float], typer.Option(help="Report grammar: loss weight of a claim after evidence (default: clean per evidence sentence).")] = None,
    match_lengths: Annotated[bool, typer.Option(help="Report grammar: weigh clean sentences to the evidence sentences' length distribution.")] = False,
    max_retries: MaxRetriesOpt = DEFAULT_MAX_RETRIES,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
) -> None:
    """Distil a teacher's audits into a LoRA adapter on the auditor's own tokens (TRL's SFTTrainer); set
    `policy.init_adapter` to its `adapter/` directory to start GRPO from it. Under a sentence report grammar the
    teacher only probes, and every sentence of its audits trains the verdict after it."""
    from auditrl.train.sft import SFTSettings

    try:
        settings = SFTSettings(
            teacher=teacher, episodes=episodes, epochs=epochs, batch_size=batch_size, learning_rate=learning_rate,
            seed=random_seed, keep=keep, finding_repeats=finding_repeats,
            verdict_weight=verdict_weight, claim_weight=claim_weight, match_lengths=match_lengths, teacher_calls=call_limits(max_retries, timeout),
        )  # fmt: skip
    except ValidationError as exc:
        raise fail(validation_problems(exc)) from exc
    from auditrl.models.roles import UnknownModelError, provider_of
    from auditrl.train.config import load_config

    from auditrl.train.sft import check_settings, run_sft

    try:
        cfg = load_config(config)
        provider_of(teacher)
        check_settings(cfg, settings)
    except (ConfigFileError, UnknownModelError, ValueError) as exc:
        raise fail(str(exc)) from exc

    directory = out or Path("runs") / f"{cfg.name}-sft"
    with stage_progress(console) as show:
        try:
            record = run_sft(cfg, settings, directory, on_progress=show)
        except ValueError as exc:
            raise fail(str(exc), FAILURE) from exc
    console.print(teacher_table(record))
    if sentences := record.get("sentences"):
        console.print(f"under the report grammar: the verdict trained on {sentences['evidence']} evidence and {sentences['clean']} clean "
                      f"sentences ({sentences['unlabelled']} left unlabelled), a claim weighted {sentences['claim_weight']:.2f}", highlight=False)  # fmt: skip
    losses = record["loss"]
    if losses:
        console.print(f"training loss: {losses[0]['loss']:.3f} (step {losses[0]['step']}) -> {losses[-1]['loss']:.3f} "
                      f"(step {losses[-1]['step']}); {record['tokens']['trained']:,} of {record['tokens']['total']:,} "
                      "tokens trained (the auditor's own)", highlight=False)  # fmt: skip
    console.print(f"{record['cpu_seconds']['total']:.0f} CPU s ({record['cpu_seconds']['teacher']:.0f} of them teacher audits)")
    console.print(f"adapter: [bold]{escape(record['adapter'])}[/bold]", soft_wrap=True)  # a path to copy: never wrapped
    console.print("Start GRPO from it with, in the config:", highlight=False)
    console.print(f"  policy:\n    init_adapter: {escape(record['adapter'])}", highlight=False, soft_wrap=True)


def teacher_table(record: dict) -> Table:
    """What the teacher did on planted and benign targets (its audits are what the adapter imitates)."""
    table = Table(
        title=f"teacher {record['settings']['teacher']}: {record['kept']} of {record['episodes']} audits kept "
        f"({record['examples']} training examples)"
    )
    for column in ("target", "audits", "failed", "valid reports", "claims", "reached trigger topic"):
        table.add_column(column, justify="left" if column == "target" else "right")
    for part, row in record["teacher"].items():
        reached = "-" if row["reached_trigger"] is None else str(row["reached_trigger"])
        table.add_row(part, *(str(row[k]) for k in ("audits", "failed", "valid_reports", "claims")), reached)
    return table
