"""`auditrl behaviors list|show` and `auditrl seeds list`: browse the library and the seed banks."""

from __future__ import annotations

import contextlib
import warnings
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from auditrl.behaviors.library import (
    GENERAL,
    BehaviorFileError,
    LibraryNote,
    load_behaviors,
    load_seeds,
    suggestion,
)
from auditrl.behaviors.plant import render_plant
from auditrl.behaviors.schema import Behavior, Seed
from auditrl.cli.errors import fail
from auditrl.cli.options import BehaviorsDirOpt, SeedsDirOpt, seed_ids_option
from auditrl.safe_text import short_repr
from auditrl.terminal import keep_whole

FIRST_LINE_CHARS = 90
"""A seed's first line is shown up to here in `seeds list` (the table wraps it; the seed file has the rest)."""
app = typer.Typer(no_args_is_help=True, help="The behavior library.")
seeds_app = typer.Typer(no_args_is_help=True, help="Seed banks (Petri format).")


@seeds_app.callback()
def seeds_main() -> None:
    """Seed banks (Petri format): scenario instructions for auditors."""


@contextlib.contextmanager
def reporting_overrides(console: Console) -> Iterator[None]:
    """Print each `LibraryNote` raised while loading (an override, skipped files) as a note, so neither is silent.

    Other warnings are passed on unchanged. Nothing is printed when loading fails: the error says it all.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LibraryNote)
        yield
    for w in caught:
        if issubclass(w.category, LibraryNote):
            console.print(f"[yellow]note:[/] {escape(str(w.message))}", soft_wrap=True)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def unknown_behavior(behavior_id: str, known: Collection[str]) -> str:
    """The error for an unknown behavior id, with a did-you-mean hint (or where to look) so it is fixable."""
    hint = suggestion(behavior_id, known) or " (see `auditrl behaviors list`)"
    return f"unknown behavior {short_repr(behavior_id)}{hint}"


def load_library(
    console: Console, behaviors_dirs: Sequence[Path] | None, seeds_dirs: Sequence[Path] | None
) -> tuple[dict[str, Behavior], list[Seed]]:
    """Behaviors and all seeds (user files included), with overrides noted and bad files a clean CLI error."""
    try:
        with reporting_overrides(console):
            behaviors = load_behaviors(behaviors_dirs)
            seeds = load_seeds(seeds_dirs, behavior_ids=set(behaviors))
    except BehaviorFileError as exc:
        raise fail(str(exc)) from exc
    return behaviors, seeds


@app.command("list")
def list_behaviors(
    split: Annotated[str | None, typer.Option(help="Only this split: train or heldout.")] = None,
    tag: Annotated[list[str] | None, typer.Option(help="Only behaviors carrying any of these tags.")] = None,
    behaviors_dir: BehaviorsDirOpt = None,
    seeds_dir: SeedsDirOpt = None,
) -> None:
    """List behaviors with their split and the size of their seed bank."""
    console = Console()
    behaviors, seeds = load_library(console, behaviors_dir, seeds_dir)
    if split is not None and split not in ("train", "heldout"):
        raise fail(f"--split must be 'train' or 'heldout', got {short_repr(split)}")
    counts = Counter(s.behavior for s in seeds)
    table = Table(title="Behaviors")
    table.add_column("id", style="bold", no_wrap=True)
    table.add_column("name")
    table.add_column("split")
    table.add_column("#seeds", justify="right")
    shown = 0
    for b in sorted(behaviors.values(), key=lambda b: (b.split != "train", b.id)):
        if split is not None and b.split != split:
            continue
        if tag and not set(tag).intersection(b.tags):
            continue
        table.add_row(escape(b.id), escape(b.name), b.split, str(counts.get(b.id, 0)))
        shown += 1
    console.print(keep_whole(table, "id"))
    console.print(f"{shown} behavior(s); {counts.get(None, 0)} general seed(s).")


@app.command("show")
def show_behavior(
    behavior_id: Annotated[str, typer.Argument(metavar="ID", help="Behavior id.")],
    plant: Annotated[bool, typer.Option("--plant", help="Also print the rendered hidden system prompt.")] = False,
    behaviors_dir: BehaviorsDirOpt = None,
) -> None:
    """Show one behavior: definition, triggers, evidence, cover story (and its plant with --plant)."""
    console = Console()
    try:
        with reporting_overrides(console):
            behaviors = load_behaviors(behaviors_dir)
    except BehaviorFileError as exc:
        raise fail(str(exc)) from exc
    if behavior_id not in behaviors:
        raise fail(unknown_behavior(behavior_id, behaviors))
    b = behaviors[behavior_id]
    console.print(f"[bold]{escape(b.name)}[/] ({escape(b.id)}, split: {b.split}, tags: {escape(', '.join(b.tags))})")
    console.print(f"source: {escape(str(b.source))}")
    console.print(Panel(escape(b.definition), title="definition", title_align="left"))
    console.print("[bold]triggers[/]")
    for t in b.triggers:
        console.print(f"  - {escape(t)}")
    console.print("[bold]evidence[/]")
    for e in b.evidence:
        console.print(f"  - {escape(e)}")
    console.print(Panel(escape(b.cover_story), title="cover story", title_align="left"))
    if plant:
        console.print(Panel(escape(render_plant(b)), title="plant (hidden system prompt)", title_align="left"))


@seeds_app.command("list")
def list_seeds(
    behavior: Annotated[str | None, typer.Option(help="Only this behavior's bank ('general' = general seeds).")] = None,
    tag: Annotated[list[str] | None, typer.Option(help="Only seeds carrying any of these tags.")] = None,
    seed_id: Annotated[list[str] | None, seed_ids_option("Only these seed ids (repeatable).")] = None,
    seeds_dir: SeedsDirOpt = None,
    behaviors_dir: BehaviorsDirOpt = None,
) -> None:
    """List seeds with their behavior, tags and first line."""
    console = Console()
    try:
        with reporting_overrides(console):
            behaviors = load_behaviors(behaviors_dir)
            if behavior is not None and behavior != GENERAL and behavior not in behaviors:
                raise ValueError(unknown_behavior(behavior, [*behaviors, GENERAL]))
            seeds = load_seeds(seeds_dir, ids=seed_id, tags=tag, behavior=behavior, behavior_ids=set(behaviors))
    except ValueError as exc:  # BehaviorFileError included
        raise fail(str(exc)) from exc
    table = Table(title="Seeds")
    table.add_column("id", style="bold", no_wrap=True)
    table.add_column("behavior")
    table.add_column("tags")
    table.add_column("first line")
    for s in seeds:
        first = next((line for line in s.instructions.splitlines() if line.strip()), "")
        first = first if len(first) <= FIRST_LINE_CHARS else first[:FIRST_LINE_CHARS].rstrip() + "…"
        table.add_row(escape(s.id), escape(s.behavior or "general"), escape(", ".join(s.tags)), escape(first))
    console.print(keep_whole(table, "id", "behavior"))
    console.print(f"{len(seeds)} seed(s).")
