"""The `auditrl` command line: one typer app that gathers each package's commands."""

from __future__ import annotations

import typer

from auditrl.analysis.cli import strategies
from auditrl.behaviors.cli import app as behaviors_app
from auditrl.behaviors.cli import seeds_app
from auditrl.evaluate.cli import evaluate
from auditrl.judges.cli import app as judge_app
from auditrl.scaffold.cli import audit, export
from auditrl.train.cli import monitor, train

app = typer.Typer(
    name="auditrl",
    help="Train and evaluate alignment-auditing agents with reinforcement learning.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)
app.add_typer(behaviors_app, name="behaviors", help="The behavior library.")
app.add_typer(seeds_app, name="seeds", help="Seed banks (Petri format).")
app.add_typer(judge_app, name="judge", help="Run judges and reward designs over transcripts.")
app.command()(audit)
app.command()(export)
app.command()(train)
app.command()(monitor)
app.command()(evaluate)
app.command()(strategies)
