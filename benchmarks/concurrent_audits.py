"""Concurrent audits against an API with 200 ms latency (goal: 64 at a time, 30x sequential, bounded memory).

A loopback OpenAI-compatible server (auditrl.testing) plays auditor and target through inspect-ai's
`openai-api` provider, answering every request after `--latency-ms`. The same audits run through
`auditrl audit`'s runner sequentially and then `--concurrency` at a time; throughput is compared and the
process's peak RSS is read after each phase (a run of 4x the episodes at the same concurrency shows
whether memory grows with the number of episodes or only with the number in flight).

    python benchmarks/concurrent_audits.py --episodes 64 --concurrency 64 --latency-ms 200
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import typer
from inspect_ai.model import GenerateConfig
from rich.console import Console
from rich.table import Table

from auditrl.behaviors.library import GENERAL, load_seeds
from auditrl.cli.audit import build_specs, run_audits
from auditrl.models.roles import resolve_model
from auditrl.scaffold.transcript import Budget
from auditrl.testing.openai_server import OpenAIServer, Reply, Responder, ToolCallReply

REPORT = {"no_behavior_found": True, "predictions": [], "summary": "Probed ordinary requests; nothing unusual."}


def auditor_reply(turns: int, delay_s: float) -> Responder:
    """Send `turns - 1` messages, end the conversation, then report."""

    def respond(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        if "final report" in str(messages[-1].get("content")):
            return Reply(json.dumps(REPORT), delay_s=delay_s)
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn < turns - 1:
            call = ToolCallReply("send_message", {"message": f"Question {turn}: how do you handle refunds?"})
        else:
            call = ToolCallReply("end_conversation", {})
        return Reply(tool_calls=[call], delay_s=delay_s)

    return respond


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(auditor: str, target: str, episodes: int, concurrency: int, turns: int, out: Path) -> tuple[float, int]:
    """Wall seconds for `episodes` audits at `concurrency`, and how many ended in an error."""
    seeds = sorted(load_seeds(behavior=GENERAL), key=lambda s: s.id)
    specs = build_specs(None, seeds, episodes, Budget(max_turns=turns), auditor, target, "native")
    with open(os.devnull, "w") as sink:
        start = time.perf_counter()
        transcripts = asyncio.run(
            run_audits(specs, resolve_model(auditor), resolve_model(target), out, concurrency, Console(file=sink), GenerateConfig(), 0)
        )
    return time.perf_counter() - start, sum(t.status == "error" for t in transcripts)


def main(
    episodes: int = typer.Option(64, help="Episodes in the concurrent run."),
    concurrency: int = typer.Option(64, help="Episodes at a time."),
    sequential: int = typer.Option(8, help="Episodes in the sequential run (its per-episode time is the baseline)."),
    latency_ms: int = typer.Option(200, help="Server latency per request."),
    turns: int = typer.Option(3, help="Auditor turns per episode."),
) -> None:
    """Print throughput sequentially and concurrently, the speedup and peak memory."""
    delay = latency_ms / 1000
    table = Table(title=f"Concurrent audits, {latency_ms} ms per request, {turns} auditor turns per episode")
    for column in ("run", "episodes", "at a time", "wall s", "episodes/s", "speedup", "errors", "peak RSS MiB"):
        table.add_column(column, justify="left" if column == "run" else "right")
    base = 0.0
    phases = (("sequential", sequential, 1), ("concurrent", episodes, concurrency), ("concurrent, 4x episodes", 4 * episodes, concurrency))
    for name, n, c in phases:
        # fresh servers (new model names) per phase: inspect-ai keeps one connection pool per model name
        with (
            tempfile.TemporaryDirectory() as tmp,
            OpenAIServer(responder=auditor_reply(turns, delay)) as auditor_server,
            OpenAIServer(default=Reply("We refund within 30 days of purchase.", delay_s=delay)) as target_server,
        ):
            os.environ.update({**auditor_server.environ(), **target_server.environ()})
            auditor, target = auditor_server.model_spec("auditor"), target_server.model_spec("target")
            seconds, errors = run(auditor, target, n, c, turns, Path(tmp) / "transcripts.jsonl")
        rate = n / seconds
        base = base or rate
        table.add_row(name, str(n), str(c), f"{seconds:.1f}", f"{rate:.2f}", f"{rate / base:.1f}x", str(errors), f"{peak_rss_mib():.0f}")
    Console().print(table)


if __name__ == "__main__":
    typer.run(main)
