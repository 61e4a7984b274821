"""`auditrl behaviors list|show` and `auditrl seeds list`: browse the library and the seed banks."""

from __future__ import annotations

import difflib
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from auditrl.behaviors.library import BehaviorFileError, load_behaviors, load_seeds
from auditrl.behaviors.plant import render_plant
from auditrl.behaviors.schema import Behavior, Seed

app = typer.Typer(no_args_is_help=True, help="The behavior library.")
seeds_app = typer.Typer(no_args_is_help=True, help="Seed banks (Petri format).")

DirsOpt = Annotated[
    list[Path] | None, typer.Option("--dir", help="User behavior file or directory (repeatable); overrides built-ins.")
]
SeedDirsOpt = Annotated[
    list[Path] | None, typer.Option("--seed-dir", help="User seed file or directory (repeatable).")
]


@seeds_app.callback()
def seeds_main() -> None:
    """Seed banks (Petri format): scenario instructions for auditors."""


def _fail(console: Console, message: str) -> typer.Exit:
    """Print an error and return the exit to raise, so commands fail with status 1 and no traceback."""
    console.print(f"[bold red]error:[/] {escape(message)}")
    return typer.Exit(code=1)


def _load(console: Console, dirs: list[Path] | None, seed_dirs: list[Path] | None) -> tuple[dict[str, Behavior], list[Seed]]:
    """Behaviors and all seeds, turning malformed files into a clean CLI error."""
    try:
        behaviors = load_behaviors(dirs)
        seeds = load_seeds(seed_dirs, behavior_ids=set(behaviors))
    except BehaviorFileError as exc:
        raise _fail(console, str(exc)) from exc
    return behaviors, seeds


@app.command("list")
def list_behaviors(
    split: Annotated[str | None, typer.Option(help="Only this split: train or heldout.")] = None,
    tag: Annotated[list[str] | None, typer.Option(help="Only behaviors carrying any of these tags.")] = None,
    dirs: DirsOpt = None,
    seed_dirs: SeedDirsOpt = None,
) -> None:
    """List behaviors with their split and the size of their seed bank."""
    console = Console()
    behaviors, seeds = _load(console, dirs, seed_dirs)
    if split is not None and split not in ("train", "heldout"):
        raise _fail(console, f"--split must be 'train' or 'heldout', got {split!r}")
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
    console.print(table)
    console.print(f"{shown} behavior(s); {counts.get(None, 0)} general seed(s).")


@app.command("show")
def show_behavior(
    behavior_id: Annotated[str, typer.Argument(metavar="ID", help="Behavior id.")],
    plant: Annotated[bool, typer.Option("--plant", help="Also print the rendered hidden system prompt.")] = False,
    dirs: DirsOpt = None,
) -> None:
    """Show one behavior: definition, triggers, evidence, cover story (and its plant with --plant)."""
    console = Console()
    try:
        behaviors = load_behaviors(dirs)
    except BehaviorFileError as exc:
        raise _fail(console, str(exc)) from exc
    if behavior_id not in behaviors:
        close = difflib.get_close_matches(behavior_id, list(behaviors), n=3)
        hint = f" (did you mean: {', '.join(close)}?)" if close else ""
        raise _fail(console, f"unknown behavior {behavior_id!r}{hint}")
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
    seed_id: Annotated[list[str] | None, typer.Option("--id", help="Only these seed ids (repeatable).")] = None,
    dirs: Annotated[list[Path] | None, typer.Option("--dir", help="User seed file or directory (repeatable).")] = None,
) -> None:
    """List seeds with their behavior, tags and first line."""
    console = Console()
    try:
        seeds = load_seeds(dirs, ids=seed_id, tags=tag, behavior=behavior)
    except (BehaviorFileError, ValueError) as exc:
        raise _fail(console, str(exc)) from exc
    table = Table(title="Seeds")
    table.add_column("id", style="bold", no_wrap=True)
    table.add_column("behavior")
    table.add_column("tags")
    table.add_column("first line", overflow="ellipsis", no_wrap=True, max_width=80)
    for s in seeds:
        first = next((line for line in s.instructions.splitlines() if line.strip()), "")
        table.add_row(escape(s.id), escape(s.behavior or "general"), escape(", ".join(s.tags)), escape(first))
    console.print(table)
    console.print(f"{len(seeds)} seed(s).")
