"""The `auditrl` command line: the top layer, one typer app over every package; nothing below imports it.

Each command's module is imported only when that command runs: most of them need inspect-ai, torch or
scikit-learn, which take seconds to import, and `auditrl --help` or `auditrl behaviors list` need none
of them. A new command is one row of `COMMANDS`.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
from typing import TYPE_CHECKING, Any, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:
    from typer import _click  # the click that typer vendors, which its own classes are typed with

from auditrl import terminal


class CommandEntry(NamedTuple):
    """Where a command lives ("module:attribute", a function or a typer app) and its line in `--help`."""

    target: str
    summary: str


COMMANDS: dict[str, CommandEntry] = {
    "behaviors": CommandEntry("auditrl.cli.behaviors:app", "The behavior library."),
    "seeds": CommandEntry("auditrl.cli.behaviors:seeds_app", "Seed banks (Petri format)."),
    "judge": CommandEntry("auditrl.cli.judge:app", "Run judges and reward designs over transcripts."),
    "audit": CommandEntry("auditrl.cli.audit:audit", "Audit a target: planted with --behavior, or --benign."),
    "export": CommandEntry("auditrl.cli.audit:export", "Export audit transcripts as an Inspect eval log."),
    "train": CommandEntry("auditrl.cli.train:train", "Train an AuditWorld or LM auditor from a config."),
    "sft": CommandEntry("auditrl.cli.sft:sft", "Warm-start an LM auditor: LoRA SFT on a teacher's audits."),
    "monitor": CommandEntry("auditrl.cli.train:monitor", "Print the reward-hacking monitors of a training run."),
    "evaluate": CommandEntry(
        "auditrl.cli.evaluate:evaluate", "The evaluation suite over stored transcripts, with 95% CIs."
    ),
    "suite": CommandEntry("auditrl.cli.suite:suite", "Run the held-out evaluation suite end to end."),
    "strategies": CommandEntry("auditrl.cli.strategies:strategies", "Cluster the auditors' strategies."),
    "crux": CommandEntry("auditrl.cli.crux:app", "Crux evaluation: a fast proxy for choosing checkpoints."),
    "models": CommandEntry("auditrl.cli.models:app", "Check model strings: provider, SDK, key, protocols, a ping."),
    "implant": CommandEntry("auditrl.cli.implant:implant", "Implant a behavior into a local model's weights (LoRA)."),
    "transfer": CommandEntry(
        "auditrl.cli.transfer:transfer", "AuditBench-style transfer audits and their detection table."
    ),
}
"""Every command by name; `--help` lists them from here without importing their modules."""


def load_command(name: str) -> _click.Command:
    """Import a command's module and build its command (a group for a typer app)."""
    module, _, attribute = COMMANDS[name].target.partition(":")
    found: Any = getattr(importlib.import_module(module), attribute)
    command: _click.Command
    if isinstance(found, typer.Typer):
        command = typer.main.get_group(found)
    else:
        holder = typer.Typer(add_completion=False, rich_markup_mode="rich")
        holder.command(name=name)(found)
        command = typer.main.get_command(holder)
    command.name = name
    from auditrl.cli.options import arrange_help

    for each in [command, *getattr(command, "commands", {}).values()]:
        arrange_help(each)
    return command


class LazyCommands(TyperGroup):
    """A group that lists commands from `COMMANDS` and imports one only when it is invoked."""

    def list_commands(self, ctx: _click.Context) -> list[str]:
        return [*super().list_commands(ctx), *COMMANDS]

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return super().get_command(ctx, cmd_name)
        return TyperCommand(cmd_name, short_help=entry.summary)

    def resolve_command(
        self, ctx: _click.Context, args: list[str]
    ) -> tuple[str | None, _click.Command | None, list[str]]:
        known = self.list_commands(ctx)
        if args and not args[0].startswith("-") and args[0] not in known:  # typer suggests only among built commands
            matches = difflib.get_close_matches(args[0], known)
            if matches:
                ctx.fail(f"No such command {args[0]!r}. Did you mean {', '.join(map(repr, matches))}?")
        name, command, rest = super().resolve_command(ctx, args)
        if name in COMMANDS:
            command = load_command(name)
            rest = current_spellings(name, command, rest)
        return name, command, rest


def current_spellings(name: str, command: _click.Command, args: list[str]) -> list[str]:
    """A command's arguments with deprecated spellings (`auditrl.cli.options.DEPRECATED_OPTIONS`) replaced."""
    from auditrl.cli.errors import warn
    from auditrl.cli.options import undeprecated

    head: list[str] = []
    if isinstance(command, TyperGroup) and args and args[0] in command.commands:
        head, name, args = [args[0]], f"{name} {args[0]}", args[1:]
    args, warnings = undeprecated(name, args)
    for warning in warnings:
        warn(warning)
    return [*head, *args]


app = typer.Typer(
    name="auditrl",
    cls=LazyCommands,
    no_args_is_help=True,
    rich_markup_mode="rich",
)


def show_version(value: bool) -> None:
    """`--version`: the installed package's version, then exit."""
    if value:
        typer.echo(f"auditrl {importlib.metadata.version('auditrl')}")
        raise typer.Exit()


@app.callback()
def main(
    verbose: bool = typer.Option(
        False,
        "--verbose",
        help="Show what transformers, peft, TRL and the Hub client log and warn (errors only by default).",
    ),
    version: bool = typer.Option(
        False, "--version", callback=show_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Train and evaluate alignment-auditing agents with reinforcement learning."""  # the group's help text
    terminal.configure(verbose)
    from auditrl.models.secrets import install_redaction

    install_redaction()  # whatever echoes a key back, no console line or log record of a command shows it
