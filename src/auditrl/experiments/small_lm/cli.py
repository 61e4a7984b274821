"""`python -m auditrl.experiments.small_lm`: train, warm-start and evaluate the small-model experiment's runs.

`train` is `auditrl train` with the experiment's hooks attached (its `experiment:` section validated first);
`sft` is `auditrl sft` with the experiment's weighting and, under a report grammar, choice SFT; `choice-gradient`
trains an SFT base's quote on the exact gradient of its expected reward.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from auditrl.cli.errors import FAILURE, fail
from auditrl.cli.limits import call_limits
from auditrl.cli.options import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    MaxRetriesOpt,
    TimeoutOpt,
    out_dir_option,
    random_seed_option,
)
from auditrl.cli.progress import stage_progress
from auditrl.configfile import validation_problems
from auditrl.experiments.small_lm.settings import load_run_config
from auditrl.train.config import ConfigFileError

console = Console()
app = typer.Typer(
    name="small_lm",
    help="The small-model experiment: its GRPO runs, warm starts and the choice gradient.",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def train(
    config: Annotated[Path, typer.Option("--config", "-c", help="A grpo_lm config with an `experiment:` section.")],
    out: Annotated[Path | None, out_dir_option("Run directory (default: runs/<name>).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the per-rank plan; loads no model.")] = False,
    processes: Annotated[
        int | None, typer.Option("--processes", min=1, help="With --dry-run: plan for N processes.")
    ] = None,
) -> None:
    """Train a grpo_lm run with the experiment's hooks (auditrl.experiments.small_lm.extension)."""
    from auditrl.finite import NonFiniteTrainingError
    from auditrl.train.plan import dry_run as plan_run

    try:
        cfg = load_run_config(config)
        if dry_run:
            plan = plan_run(cfg, processes)
    except ValueError as exc:  # ConfigFileError included
        raise fail(str(exc)) from exc
    if dry_run:
        console.print(plan.table)
        for warning in plan.warnings:
            console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)
        return
    from auditrl.cli.limits import showing_retries
    from auditrl.experiments.small_lm.extension import SmallLMExtension
    from auditrl.train.grpo import run_from_config

    try:
        with showing_retries(console):
            run_dir = run_from_config(config, out, extension=SmallLMExtension(cfg))
    except ConfigFileError as exc:
        raise fail(str(exc)) from exc
    except NonFiniteTrainingError as exc:
        raise fail(f"{config}: {exc}", FAILURE) from exc
    from auditrl.pages.training import write_training_page
    from auditrl.train.runtime import is_main_process

    if is_main_process():
        write_training_page(run_dir, cfg)
    console.print(f"run directory: [bold]{escape(str(run_dir))}[/bold]")


@app.command()
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
    finding_repeats: Annotated[
        int, typer.Option(help="Times an audit whose report identifies the planted behavior is trained on per epoch.")
    ] = 1,
    verdict_weight: Annotated[
        float, typer.Option(help="Loss weight of each report's verdict word (1: every trained token alike).")
    ] = 1.0,
    claim_weight: Annotated[
        float | None,
        typer.Option(
            help="Report grammar: loss weight of a claim after evidence (default: clean per evidence sentence)."
        ),
    ] = None,
    match_lengths: Annotated[
        bool, typer.Option(help="Report grammar: weigh clean sentences to the evidence sentences' length distribution.")
    ] = False,
    max_retries: MaxRetriesOpt = DEFAULT_MAX_RETRIES,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
) -> None:
    """`auditrl sft` with the experiment's weighting; under a sentence report grammar the teacher only probes, and
    every sentence of its audits trains the verdict after it."""
    from auditrl.cli.sft import teacher_table
    from auditrl.experiments.small_lm.choice_sft import SmallLMSFTSettings, check_settings, run_experiment_sft
    from auditrl.models.roles import UnknownModelError, provider_of

    try:
        settings = SmallLMSFTSettings(
            teacher=teacher, episodes=episodes, epochs=epochs, batch_size=batch_size, learning_rate=learning_rate,
            seed=random_seed, keep=keep, finding_repeats=finding_repeats, verdict_weight=verdict_weight,
            claim_weight=claim_weight, match_lengths=match_lengths, teacher_calls=call_limits(max_retries, timeout),
        )  # fmt: skip
    except ValidationError as exc:
        raise fail(validation_problems(exc)) from exc
    try:
        cfg = load_run_config(config)
        provider_of(teacher)
        check_settings(cfg, settings)
    except (ConfigFileError, UnknownModelError, ValueError) as exc:
        raise fail(str(exc)) from exc
    directory = out or Path("runs") / f"{cfg.name}-sft"
    with stage_progress(console) as show:
        try:
            record = run_experiment_sft(cfg, settings, directory, on_progress=show)
        except ValueError as exc:
            raise fail(str(exc), FAILURE) from exc
    console.print(teacher_table(record))
    if sentences := record.get("sentences"):
        console.print(f"under the report grammar: the verdict trained on {sentences['evidence']} evidence and "
            f"{sentences['clean']} clean "
                      f"sentences ({sentences['unlabelled']} left unlabelled), a claim weighted "
                          f"{sentences['claim_weight']:.2f}", highlight=False)  # fmt: skip
    console.print(
        f"{record['cpu_seconds']['total']:.0f} CPU s ({record['cpu_seconds']['teacher']:.0f} of them teacher audits)"
    )
    console.print(f"adapter: [bold]{escape(record['adapter'])}[/bold]", soft_wrap=True)  # a path to copy: never wrapped


@app.command("choice-gradient")
def choice_gradient(
    config: Annotated[
        Path,
        typer.Option(
            "--config",
            "-c",
            help="A grpo_lm config with teacher probing, a sentence report grammar, "
            "experiment.quote_credit: expected and experiment.expected_verdict: start.",
        ),
    ],  # fmt: skip
    init_adapter: Annotated[
        Path | None,
        typer.Option(
            help="The starting adapter (`auditrl sft`'s adapter/) in place of the config's policy.init_adapter."
        ),
    ] = None,
    out: Annotated[Path | None, out_dir_option("Output directory (default: runs/<name>-choice-gradient).")] = None,
    episodes: Annotated[
        int, typer.Option(help="Training rows drawn like the GRPO run's batches (duplicates dropped).")
    ] = 256,
    epochs: Annotated[float, typer.Option(help="Passes over the audits with a choice to learn.")] = 2.0,
    batch_size: Annotated[int, typer.Option(help="Audits per optimizer step.")] = 8,
    learning_rate: Annotated[float, typer.Option(help="Adapter learning rate (constant).")] = 3e-4,
    random_seed: Annotated[int, random_seed_option("the rows and the data order")] = 2,
    benign_weight: Annotated[
        float, typer.Option(help="Weight of benign audits in the loss (0: the quote learns from planted audits only).")
    ] = 1.0,
    benign_anchor: Annotated[
        float, typer.Option(help="Weight of KL(the start's quote || the policy's) on benign audits (0: none).")
    ] = 0.0,
    samples: Annotated[
        int | None,
        typer.Option(
            help=(
                "Quotes drawn per audit and step: GRPO's sampled estimate of the gradient instead of the exact one "
                "(at least 2)."
            )
        ),
    ] = None,
) -> None:
    """Score every sentence a teacher-probed training audit lets the starting adapter quote (the run's reward for a
    claim quoting it, and for "nothing found", weighted by the start's verdict after it), then train the quote on
    minus the audit's expected reward: GRPO's objective with every choice in the group, weighted by its probability."""
    from auditrl.experiments.small_lm.choice_gradient import ChoiceGradientSettings

    try:
        settings = ChoiceGradientSettings(
            episodes=episodes,
            epochs=epochs,
            batch_size=batch_size,
            learning_rate=learning_rate,
            seed=random_seed,
            benign_weight=benign_weight,
            benign_anchor=benign_anchor,
            samples=samples,
        )
    except ValidationError as exc:
        raise fail(validation_problems(exc)) from exc
    from auditrl.experiments.small_lm.choice_gradient import check_config, run_choice_gradient
    from auditrl.train.policy import check_init_adapter

    try:
        cfg = load_run_config(config)
        if init_adapter is not None:
            cfg = cfg.model_copy(
                update={"policy": cfg.policy.model_copy(update={"init_adapter": init_adapter.resolve()})}
            )
        check_config(cfg)
        if cfg.policy.init_adapter is None:
            raise ValueError(
                "field 'policy.init_adapter': the choice gradient trains a starting adapter's quote; set it or "
                "pass --init-adapter"
            )
        check_init_adapter(cfg.policy)
    except (ConfigFileError, ValueError) as exc:
        raise fail(str(exc)) from exc

    directory = out or Path("runs") / f"{cfg.name}-choice-gradient"
    with stage_progress(console) as show:
        try:
            record = run_choice_gradient(cfg, settings, directory, on_progress=show)
        except ValueError as exc:
            raise fail(str(exc), FAILURE) from exc
    console.print(reward_table(record))
    steps = record["expected reward by step"]
    if steps:
        console.print(
            f"expected reward of a training batch: {steps[0]['expected reward']:.3f} (step {steps[0]['step']}) "
            f"-> {steps[-1]['expected reward']:.3f} (step {steps[-1]['step']})",
            highlight=False,
        )
    console.print(f"{record['cpu_seconds']:.0f} CPU s")
    console.print(f"adapter: [bold]{escape(record['adapter'])}[/bold]", soft_wrap=True)  # a path to copy: never wrapped


def reward_table(record: dict) -> Table:
    """The training audits' expected reward under the start, and under the best quote of each (what training can
    reach)."""
    from auditrl.experiments.small_lm.choice_gradient import estimate_label

    weight, anchor = record["settings"]["benign_weight"], record["settings"]["benign_anchor"]
    table = Table(
        title=f"{sum(record['trained audits'].values())} of {record['audits']} training audits trained (benign weight "
        f"{weight:g}, anchor {anchor:g}, "
        f"{estimate_label(record['settings'].get('samples'))}); "
        "expected reward over those with a choice to learn"
    )
    for column in ("target", "audits trained", "start's expected reward", "best quote's"):
        table.add_column(column, justify="left" if column == "target" else "right")
    for part in ("planted", "benign"):
        start, best = record["start's expected reward"][part], record["best expected reward"][part]
        cells = ("-" if x is None else f"{x:.3f}" for x in (start, best))
        table.add_row(part, str(record["trained audits"][part]), *cells)
    return table
