"""Where a trained auditor's quote moved: by the length of the sentence quoted, read from report_learning's stored
exact scores.

The SFT base's verdict claims after most long sentences and few short ones, so a quote trained against that verdict
can earn its reward by length alone: quiet (short) sentences on benign audits, long ones on planted audits, where
evidence sentences are long. This reads, per held-out part and target, the expected words of the sentence quoted, the
chance of quoting one under `LONG` words, of quoting evidence, and of a claim, for a trained auditor and its start,
with the change paired over audits. The probability of each choice comes from `<out>/exact_scores/`; the sentences
themselves are probed again (the teacher and the `sim` targets are deterministic, and each audit's message ids are
drawn from the audit).

    OMP_NUM_THREADS=1 python benchmarks/quote_lengths.py --out RUN [--start-out BASE_RUN] \
        [--auditor "SFT + choice gradient"]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from report_learning import CHOICE_GRADIENT, CONFIG, LONG, SCORES, STARTS, audit_key, unit_key
from rich.console import Console
from rich.table import Table

from auditrl.behaviors.library import load_behaviors
from auditrl.experiments.small_lm.report_audits import HELD_OUT_PARTS, held_out_rows
from auditrl.experiments.small_lm.report_choices import ProbedAudit, probed_audits
from auditrl.experiments.small_lm.settings import load_run_config
from auditrl.models.precision import describe_cpu
from auditrl.stats import mean_ci
from auditrl.train.episodes import seed_bank
from auditrl.train.policy import load_policy
from auditrl.train.rollout import ChatSegments

console = Console()
READINGS = ("words quoted", f"P(quote < {LONG} words)", "P(quote evidence)", "P(claim)")


def readings(audit: ProbedAudit, scores: dict[str, list[float]]) -> dict[str, float]:
    """One audit's expected readings under one auditor's probabilities of each choice (and of a claim after it)."""
    quote = np.asarray(scores["quote"])
    words = np.asarray([len(c.text.split()) for c in audit.choices], dtype=float)
    return {
        READINGS[0]: float(quote @ words),
        READINGS[1]: 100.0 * float(quote @ (words < LONG)),
        READINGS[2]: 100.0 * float(quote @ np.asarray([bool(c.label) for c in audit.choices], dtype=float)),
        READINGS[3]: 100.0 * float(quote @ np.asarray(scores["claim"])),
    }


def main(
    out: Annotated[
        Path, typer.Option(help="A report_learning output folder holding the trained auditor's exact scores.")
    ],
    start_out: Annotated[
        Path | None, typer.Option(help="The folder holding its start's exact scores (default: --out).")
    ] = None,
    auditor: Annotated[str, typer.Option(help="The trained auditor.")] = CHOICE_GRADIENT,
    config: Annotated[
        Path, typer.Option(help="The config the held-out audits were probed under (report_learning's --config).")
    ] = CONFIG,
) -> None:
    if auditor not in STARTS:
        raise typer.BadParameter(
            f"{auditor!r} is no trained auditor; choose from {', '.join(STARTS)}", param_hint="--auditor"
        )
    start = STARTS[auditor]
    folders = {
        auditor: out / SCORES / auditor.replace(" ", "_"),
        start: (start_out or out) / SCORES / start.replace(" ", "_"),
    }
    for name, folder in folders.items():
        if not folder.is_dir():
            raise SystemExit(
                f"{folder}: no exact scores of {name!r} (run benchmarks/report_learning.py with --auditor {name!r})"
            )
    cfg = load_run_config(config)
    _, tokenizer = load_policy(
        cfg.policy.model_copy(update={"init_adapter": None})
    )  # the policy's tokenizer and chat template
    behaviors = load_behaviors(cfg.data.behavior_paths or None)
    record: dict[str, Any] = {"cpu": describe_cpu(), "auditor": auditor, "start": start}
    for part in HELD_OUT_PARTS:
        file = part.replace(" ", "_") + ".json"
        if not all((f / file).is_file() for f in folders.values()):
            continue
        scores = {name: json.loads((f / file).read_text()) for name, f in folders.items()}
        rows = [
            r
            for r in held_out_rows(cfg, part, behaviors)
            if audit_key(r.seed_id, r.family, r.benign) in scores[auditor]
        ]
        audits = [
            a
            for a in probed_audits(cfg, ChatSegments(tokenizer), behaviors, seed_bank(cfg, behaviors), rows)
            if a.choices
        ]
        table = Table(
            title=f"{part}: where {auditor}'s quote moved from {start}'s, % or words, mean [95% CI] over audits",
            caption=record["cpu"],
        )
        for column in ("target", "reading", start, auditor, "change (paired)"):
            table.add_column(column, justify="left" if column in ("target", "reading") else "right")
        record[part] = {}
        for target, benign in (("planted", False), ("benign", True)):
            units = [a for a in audits if a.transcript.benign == benign and unit_key(a.transcript) in scores[start]]
            read = {name: [readings(a, s[unit_key(a.transcript)]) for a in units] for name, s in scores.items()}
            record[part][target] = {}
            for reading in READINGS:
                before, after = (np.asarray([r[reading] for r in read[name]]) for name in (start, auditor))
                cells = {start: mean_ci(before), auditor: mean_ci(after), "change": mean_ci(after - before)}
                record[part][target][reading] = {k: v.model_dump() for k, v in cells.items()}
                shown = [f"{e.mean:.1f} [{e.lo:.1f}, {e.hi:.1f}]" for e in cells.values()]
                table.add_row(
                    f"{target} ({len(units)})",
                    reading,
                    *shown[:2],
                    f"{cells['change'].mean:+.1f} [{cells['change'].lo:+.1f}, {cells['change'].hi:+.1f}]",
                )
        console.print(table)
    (out / "quote_lengths.json").write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    typer.run(main)
