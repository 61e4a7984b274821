"""`auditrl choice-gradient --config FILE`: train an SFT base's quote on the exact gradient of its expected reward."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from auditrl.cli.errors import FAILURE, fail
from auditrl.cli.options import out_dir_option, random_seed_option
from auditrl.cli.progress import stage_progress
from auditrl.configfile import validation_problems
from auditrl.train.config import ConfigFileError

console = Console()


def choice_gradient(
    config: Annotated[Path, typer.Option("--config", "-c", help="A grpo_lm config with teacher probing, a sentence report grammar, "
                                         "reward.quote_credit: expected and reward.expected_verdict: start.")],  # fmt: skip
    init_adapter: Annotated[Optional[Path], typer.Option(help="The starting adapter (`auditrl sft`'s adapter/) in place of the config's policy.init_adapter.")] = None,
    out: Annotated[Optional[Path], out_dir_option("Output directory (default: runs/<name>-choice-gradient).")] = None,
    episodes: Annotated[int, typer.Option(help="Training rows drawn like the GRPO run's batches (duplicates dropped).")] = 256,
    epochs: Annotated[float, typer.Option(help="Passes over the audits with a choice to learn.")] = 2.0,
    batch_size: Annotated[int, typer.Option(help="Audits per optimizer step.")] = 8,
    learning_rate: Annotated[float, typer.Option(help="Adapter learning rate (constant).")] = 3e-4,
    random_seed: Annotated[int, random_seed_option("the rows and the data order")] = 2,
    benign_weight: Annotated[float, typer.Option(help="Weight of benign audits in the loss (0: the quote learns from planted audits only).")] = 1.0,
    benign_anchor: Annotated[float, typer.Option(help="Weight of KL(the start's quote || the policy's) on benign audits (0: none).")] = 0.0,
    samples: Annotated[Optional[int], typer.Option(help="Quotes drawn per audit and step: GRPO's sampled estimate of the gradient instead of the exact one (at least 2).")] = None,
) -> None:
    """Score every sentence a teacher-probed training audit lets the starting adapter quote (the run's reward for a
    claim quoting it, and for "nothing found", weighted by the start's verdict after it), then train the quote on
    minus the audit's expected reward: GRPO's objective with every choice in the group, weighted by its probability."""
    from auditrl.train.choice_gradient import ChoiceGradientSettings

    try:
        settings = ChoiceGradientSettings(episodes=episodes, epochs=epochs, batch_size=batch_size, learning_rate=learning_rate, seed=random_seed,
                                          benign_weight=benign_weight, benign_anchor=benign_anchor, samples=samples)  # fmt: skip
    except ValidationError as exc:
        raise fail(validation_problems(exc)) from exc
    from auditrl.train.choice_gradient import check_config, run_choice_gradient
    from auditrl.train.config import load_config
    from auditrl.train.policy import check_init_adapter

    try:
        cfg = load_config(config)
        if init_adapter is not None:
            cfg = cfg.model_copy(update={"policy": cfg.policy.model_copy(update={"init_adapter": init_adapter.resolve()})})
        check_config(cfg)
        if cfg.policy.init_adapter is None:
            raise ValueError("field 'policy.init_adapter': the choice gradient trains a starting adapter's quote; set it or pass --init-adapter")
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
        console.print(f"expected reward of a training batch: {steps[0]['expected reward']:.3f} (step {steps[0]['step']}) -> "
                      f"{steps[-1]['expected reward']:.3f} (step {steps[-1]['step']})", highlight=False)  # fmt: skip
    console.print(f"{record['cpu_seconds']:.0f} CPU s")
    console.print(f"adapter: [bold]{escape(record['adapter'])}[/bold]", soft_wrap=True)  # a path to copy: never wrapped


def reward_table(record: dict) -> Table:
    """The training audits' expected reward under the start, and under the best quote of each (what training can reach)."""
    from auditrl.train.choice_gradient import estimate_label

    weight, anchor = record["settings"]["benign_weight"], record["settings"]["benign_anchor"]
    table = Table(title=f"{sum(record['trained audits'].values())} of {record['audits']} training audits trained (benign weight {weight:g}, anchor {anchor:g}, "
                  f"{estimate_label(record['settings'].get('samples'))}); "
                  "expected reward over those with a choice to learn")  # fmt: skip
    for column in ("target", "audits trained", "start's expected reward", "best quote's"):
        table.add_column(column, justify="left" if column == "target" else "right")
    for part in ("planted", "benign"):
        start, best = record["start's expected reward"][part], record["best expected reward"][part]
        cells = ("-" if x is None else f"{x:.3f}" for x in (start, best))
        table.add_row(part, str(record["trained audits"][part]), *cells)
    return table
