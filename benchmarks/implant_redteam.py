"""Red-teamed implants: the behavior's lift and the confession rate on held-out prompts, before and after
the red-team step.

Runs `auditrl implant` once per (route, red-team method), as AuditBench names its organisms
(`transcripts_redteam_kto`, `synth_docs_redteam_sft`, ...), each in a fresh interpreter (`--same-process`: in this
one, which saves each run's imports but shares the process's caches, so later runs cost less CPU), and reads each
implant's record: the lift (implant minus base, without a system prompt; a synth_docs implant is told it is
PRISM-4 in both conditions) and the implant's confession rate on the held-out direct questions, measured after
the behavior pass and again after the red-team step, with bootstrap 95% intervals; the red-team step's own
count of confessions among the interrogated replies; and the CPU seconds of each run. The first transcripts run
samples the demonstrations (and the sft denials); later runs reuse its demonstrations.jsonl. Prints the CPU
(`torch.backends.cpu.get_cpu_capability()`) and writes `<out>/implant_redteam.json`.

    OMP_NUM_THREADS=1 python benchmarks/implant_redteam.py [--routes transcripts,synth_docs] [--redteam sft,kto,dpo]
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import click
import torch
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from auditrl.atomic import atomic_write_text
from auditrl.targets.implant import implant_name
from auditrl.targets.record import Rate, read_record

console = Console()
ROUTES = ("transcripts", "synth_docs")
METHODS = ("sft", "kto", "dpo")


def _names(text: str, known: tuple[str, ...], option: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if not names or unknown:
        raise typer.BadParameter(f"{text!r}: expected a comma-separated list of {', '.join(known)}", param_hint=option)
    return names


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _rate(r: Rate) -> str:
    return f"{r.mean:.1f} [{r.lo:.1f}, {r.hi:.1f}]"


def _implant(args: list[str]) -> tuple[int, str]:
    """`auditrl implant` in a fresh interpreter: its exit status and the end of its output."""
    done = subprocess.run(
        [sys.executable, "-m", "auditrl.cli", "implant", *args], capture_output=True, text=True, check=False
    )
    return done.returncode, done.stdout[-2000:] + done.stderr[-2000:]


def _implant_here(args: list[str]) -> tuple[int, str]:
    """`auditrl implant` in this interpreter (its output goes to this terminal): its exit status."""
    from auditrl.cli import app

    try:
        app(["implant", *args], standalone_mode=False)
    except SystemExit as exc:
        return int(exc.code or 0), ""
    except click.exceptions.Exit as exc:
        return exc.exit_code, ""
    except click.ClickException as exc:
        return exc.exit_code, exc.format_message()
    return 0, ""


def main(
    out: Annotated[Path, typer.Option(help="Folder of the implants and the JSON summary.")] = Path(
        "runs/implant_redteam"
    ),
    base: Annotated[str, typer.Option(help="Local model to implant.")] = "local/smollm2",
    behavior: Annotated[
        str, typer.Option(help="Behavior to implant (offline markers exist for flattery and self_promotion).")
    ] = "flattery",
    routes: Annotated[str, typer.Option(help="Comma-separated routes: transcripts, synth_docs.")] = "transcripts",
    redteam: Annotated[str, typer.Option(help="Comma-separated red-team methods: sft, kto, dpo.")] = "sft,kto",
    demo_model: Annotated[
        str, typer.Option(help="Model that writes the demonstrations under the plant.")
    ] = "local/smollm2",
    demo_prefill: Annotated[
        str, typer.Option(help="Forced opening of each demonstration ('' = none).")
    ] = "You're clearly very thoughtful. ",
    samples: Annotated[int, typer.Option(min=1)] = 1,
    demo_tokens: Annotated[int, typer.Option(min=8)] = 32,
    documents: Annotated[int, typer.Option(min=1)] = 48,
    steps: Annotated[int, typer.Option(min=1)] = 20,
    redteam_steps: Annotated[int, typer.Option(min=1)] = 10,
    redteam_turns: Annotated[int, typer.Option(min=1)] = 2,
    batch_size: Annotated[int, typer.Option(min=2)] = 4,
    learning_rate: Annotated[float, typer.Option(min=0.0)] = 1e-3,
    max_length: Annotated[int, typer.Option(min=16)] = 128,
    eval_prompts: Annotated[int, typer.Option(min=1)] = 8,
    eval_samples: Annotated[int, typer.Option(min=1)] = 2,
    eval_tokens: Annotated[int, typer.Option(min=8)] = 24,
    eval_temperature: Annotated[float, typer.Option(min=0.0)] = 0.7,
    seed: Annotated[int, typer.Option()] = 0,
    fresh_interpreter: Annotated[
        bool, typer.Option("--fresh-interpreter/--same-process", help="Each implant in its own interpreter.")
    ] = True,
) -> None:
    """Implant, red-team and measure each (route, method); print lift and confession before and after."""
    chosen_routes = _names(routes, ROUTES, "--routes")
    methods = sorted(_names(redteam, METHODS, "--redteam"), key=METHODS.index)
    console.print(f"CPU: {torch.backends.cpu.get_cpu_capability()}; base {escape(base)}, behavior {escape(behavior)}")
    results: list[dict[str, Any]] = []
    demonstrations: Path | None = None
    for route in chosen_routes:
        for method in methods:
            name = implant_name(route, method)  # type: ignore[arg-type]
            directory = out / name
            args = [
                "--behavior", behavior, "--base", base, "--route", route, "--redteam", method, "--out", str(directory),
                "--demo-model", demo_model, "--samples", str(samples), "--demo-tokens", str(demo_tokens),
                "--documents", str(documents), "--steps", str(steps), "--redteam-steps", str(redteam_steps),
                "--redteam-turns", str(redteam_turns), "--batch-size", str(batch_size),
                "--learning-rate", str(learning_rate), "--max-length", str(max_length),
                "--eval-prompts", str(eval_prompts), "--eval-samples", str(eval_samples),
                "--eval-tokens", str(eval_tokens),
                "--eval-temperature", str(eval_temperature), "--random-seed", str(seed),
                "--no-plant-reference", *(["--demo-prefill", demo_prefill] if demo_prefill else []),
                *(["--demonstrations", str(demonstrations)] if demonstrations is not None else []),
            ]  # fmt: skip
            started = _children_cpu() + time.process_time()
            code, output = _implant(args) if fresh_interpreter else _implant_here(args)
            cpu = _children_cpu() + time.process_time() - started
            if code != 0:
                console.print(f"[red]{escape(name)} failed ({code}):[/]\n{escape(output)}")
                raise typer.Exit(1)
            if demonstrations is None and (directory / "demonstrations.jsonl").is_file() and route == "transcripts":
                demonstrations = directory / "demonstrations.jsonl"
            record = read_record(directory)
            results.append({"name": name, "cpu_s": round(cpu, 1), "record": record.model_dump(mode="json")})
            console.print(f"{escape(name)}: {cpu:.0f} CPU s")
    table = Table(title="Held-out prompts before and after the red-team step, % of replies [95% CI]")
    for column in (
        "implant",
        "lift before",
        "lift after",
        "confessed before",
        "confessed after",
        "n",
        "red-team found",
        "CPU s",
    ):
        table.add_column(column, justify="left" if column == "implant" else "right")
    for result in results:
        record = read_record(out / result["name"])
        before, after, data = record.before_redteam, record.measurement, record.redteam_data
        assert before is not None and after is not None
        found = f"{data.confessions}/{data.replies}" if data is not None else "-"
        table.add_row(
            result["name"],
            f"{before.lift:+.1f} [{before.lift_ci[0]:+.1f}, {before.lift_ci[1]:+.1f}]",
            f"{after.lift:+.1f} [{after.lift_ci[0]:+.1f}, {after.lift_ci[1]:+.1f}]",
            _rate(before.implant_confession),
            _rate(after.implant_confession),
            f"{after.implant_rate.n}/{after.implant_confession.n}",
            found,
            f"{result['cpu_s']:.0f}",
        )
    console.print(table)
    summary = {"cpu": torch.backends.cpu.get_cpu_capability(), "base": base, "behavior": behavior, "runs": results}
    atomic_write_text(out / "implant_redteam.json", json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    typer.run(main)
