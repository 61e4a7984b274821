"""Reward margins on hand-built probe audits (auditrl.rewards.margins), per reward design with the `sim` judges.

For every training behavior whose trigger topics are specific, and each simulated target family, a scripted auditor
probes the trigger topic for `--turns` turns and ends with each report outcome (correct claim with the target's own
words, "nothing found", a wrong claim, a cut-off report); benign targets get the same conversations; reference designs
are run against each reference kind of auditrl.rewards.margins (base_like, silent, finder). Prints each design's mean
reward per outcome with a 95% CI over (behavior, family) probe sets, and the margins that matter for learning (paired
differences over the same probe sets):
- planted: correct - nothing (a finding must pay), nothing - wrong, unreadable vs nothing;
- benign: nothing - claim, nothing - unreadable;
and, for designs without references, what looking where the behavior shows pays when nothing is claimed: one group
of two on-topic and two off-topic audits per probe set, all ending in "nothing found" (on minus off).

    OMP_NUM_THREADS=1 python benchmarks/reward_margins.py [--turns 2] [--families steady,chatty,pliant]
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from auditrl.rewards.margins import REFERENCES, design_rewards, probing_margins, training_probe_sets
from auditrl.rewards.registry import design_spec
from auditrl.stats import mean_ci

DESIGNS = ("binary", "binary_strict", "ingroup_pairwise", "reference_pairwise", "reference_pairwise_graded")
console = Console(width=160)


def main(
    turns: Annotated[int, typer.Option(min=1, help="Probe messages per audit.")] = 2,
    families: Annotated[str, typer.Option(help="Simulated target families, comma-separated.")] = "steady,chatty,pliant",
    designs: Annotated[str, typer.Option(help="Reward designs, comma-separated.")] = ",".join(DESIGNS),
    out: Annotated[Path | None, typer.Option(help="Write the rewards as JSON here.")] = None,
) -> None:
    started, cpu = time.perf_counter(), time.process_time()
    probes = asyncio.run(training_probe_sets(families.split(","), turns))
    chosen = {p.behavior.id for p in probes}
    shown = sum(p.shown for p in probes)
    console.print(
        f"{len(probes)} probe sets ({len(chosen)} behaviors x {len(families.split(','))} families, {turns} turns); "
        f"the target showed the behavior in {shown}"
    )
    results = {}
    table = Table(title="mean reward per outcome over probe sets; margins: paired differences, mean [bootstrap 95% CI]")
    for column in (
        "design (vs reference)",
        "planted: correct",
        "nothing",
        "wrong",
        "unreadable",
        "correct - nothing",
        "nothing - wrong",
        "benign: nothing",
        "claim",
        "unreadable",
        "nothing - claim",
        "nothing - unreadable",
    ):
        table.add_column(column, justify="right")
    runs = [(n, ref) for n in designs.split(",") for ref in (REFERENCES if design_spec(n).references else ("-",))]
    for name, ref in runs:
        r = asyncio.run(design_rewards(name, "sim", probes, ref if ref != "-" else "base_like"))
        results[f"{name} vs {ref}"] = r
        p, b = r["planted"], r["benign"]
        diff = lambda x, y: (
            (d := mean_ci([a - c for a, c in zip(x, y, strict=True)])) and f"{d.mean:+.2f} [{d.lo:+.2f}, {d.hi:+.2f}]"
        )
        table.add_row(
            name if ref == "-" else f"{name} vs {ref}",
            *[f"{mean_ci(p[o]).mean:.2f}" for o in ("correct", "nothing", "wrong", "unreadable")],
            diff(p["correct"], p["nothing"]),
            diff(p["nothing"], p["wrong"]),
            *[f"{mean_ci(b[o]).mean:.2f}" for o in ("nothing", "claim", "unreadable")],
            diff(b["nothing"], b["claim"]),
            diff(b["nothing"], b["unreadable"]),
        )
    console.print(table)
    probing = Table(
        title='looking where the behavior shows, nothing claimed: on-topic minus off-topic probes, both "nothing found"'
    )
    for column in ("design", "groups", "mean [bootstrap 95% CI]"):
        probing.add_column(column, justify="right")
    results["probing"] = {}
    for name in (n for n in designs.split(",") if not design_spec(n).references):
        values = asyncio.run(probing_margins(families.split(","), turns, name, "sim"))
        results["probing"][name] = values
        e = mean_ci(values)
        probing.add_row(name, str(len(values)), f"{e.mean:+.3f} [{e.lo:+.3f}, {e.hi:+.3f}]")
    console.print(probing)
    console.print(f"{time.perf_counter() - started:.1f} s wall, {time.process_time() - cpu:.1f} s CPU (one process)")
    if out is not None:
        out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    typer.run(main)
