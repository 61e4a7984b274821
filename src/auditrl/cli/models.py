"""`auditrl models check`: will these model strings work? Provider, SDK, keys, protocols, and a ping."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from auditrl.cli.errors import FAILURE, fail
from auditrl.cli.limits import call_limits, showing_retries
from auditrl.cli.options import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S, MaxRetriesOpt, TargetPrefillOpt, TimeoutOpt

app = typer.Typer(help="Check model strings before using them.", no_args_is_help=True)


@app.command()
def check(
    specs: Annotated[
        list[str], typer.Argument(help="Model strings, e.g. openai/gpt-4o-mini openai-api/vllm/Qwen3-8B.")
    ],
    ping: Annotated[
        bool, typer.Option("--ping", help="Also make a one-token call to each and show its latency.")
    ] = False,
    max_retries: MaxRetriesOpt = DEFAULT_MAX_RETRIES,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    target_prefill: TargetPrefillOpt = None,
) -> None:
    """For each model string: provider known, SDK installed, key set (never shown), tool protocol, prefill.

    A problem gets a red line with how to fix it, and the command exits with status 1.
    """
    from auditrl.models.check import ModelCheck, check_model
    from auditrl.models.check import ping as ping_model

    console = Console()
    if not specs:
        raise fail("give at least one model string")
    checks: list[ModelCheck] = [check_model(spec, target_prefill) for spec in specs]
    if ping:
        limits = call_limits(max_retries, timeout)

        async def ping_all() -> None:
            await asyncio.gather(*(ping_model(c, limits) for c in checks))

        with showing_retries(console):
            asyncio.run(ping_all())
    for c in checks:
        console.print(f"[bold]{escape(c.spec)}[/]", highlight=False)
        for finding in c.findings:
            mark = "[green]ok[/]  " if finding.ok else "[red]FAIL[/]"
            fix = f" [dim]fix: {escape(finding.fix)}[/]" if finding.fix and not finding.ok else ""
            console.print(f"  {mark} {escape(finding.text)}{fix}", highlight=False, soft_wrap=True)
    problems = sum(not f.ok for c in checks for f in c.findings)
    if problems:
        console.print(
            f"[bold red]{problems} problem(s)[/] in {sum(not c.ok for c in checks)} of {len(checks)} model(s)"
        )
        raise typer.Exit(code=FAILURE)
    console.print(f"[green]all {len(checks)} model(s) ready[/]")
