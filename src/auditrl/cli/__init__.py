"""The `auditrl` command line: the top layer, one typer app over every package; nothing below imports it."""

from __future__ import annotations

import typer

from auditrl.cli.audit import audit, export
from auditrl.cli.behaviors import app as behaviors_app
from auditrl.cli.behaviors import seeds_app
from auditrl.cli.evaluate import evaluate
from auditrl.cli.judge import app as judge_app
from auditrl.cli.strategies import strategies
from auditrl.cli.suite import suite
from auditrl.cli.train import monitor, train

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
app.command()(suite)
app.command()(strategies)
