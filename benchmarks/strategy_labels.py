"""Do strategy labels depend on the representation? LSA and MiniLM categories on the AuditWorld job's transcripts.

Runs the main job (`configs/auditworld.yaml` by default; training resumes from the run directory's
checkpoints, so a second call only evaluates) with its transcript sample raised to `--per` transcripts
per auditor, training seed and target kind (planted, benign), all of them saved, then gives every
transcript its archetype with both classifiers of `auditrl.analysis.assignment` and reports:
- the share of transcripts (and of distinct summaries) whose category, and archetype, the two agree on;
- the agreement per auditor, and the commonest disagreements;
- each classifier's CPU time (one thread);
- the check of the paper's strategy finding (`analysis.convergence`) under both classifiers.

    python benchmarks/strategy_labels.py --per 32          # 16 auditors x 5 seeds x 64 = 5,120 transcripts
"""

from __future__ import annotations

import platform
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from auditrl.analysis.assignment import StrategyAssignment, assign_strategies
from auditrl.analysis.convergence import convergence_table, strategy_convergence
from auditrl.analysis.summaries import strategy_summary
from auditrl.auditworld.job.config import load_config
from auditrl.auditworld.job.results import AuditWorldResults
from auditrl.auditworld.job.run import run_from_config
from auditrl.scaffold.store import TRANSCRIPTS, iter_transcripts
from auditrl.scaffold.transcript_keys import POLICY

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "auditworld.yaml"


def cpu_name() -> str:
    for line in (
        Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines() if Path("/proc/cpuinfo").exists() else []
    ):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _seed_of(transcript_id: str) -> int:
    """The training seed in a sampled transcript's id (`s{seed}-planted-...`, as the job renders them)."""
    return int(transcript_id.split("-", 1)[0].removeprefix("s"))


def main(
    config: Path = typer.Option(CONFIG, help="The AuditWorld job config."),
    run: Path = typer.Option(Path("runs/strategy-labels"), help="Run directory (its checkpoints are reused)."),
    per: int = typer.Option(32, help="Transcripts per auditor, training seed and target kind."),
    show: int = typer.Option(8, help="Commonest disagreements to print."),
) -> None:
    console = Console(width=160)
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    raw.setdefault("analysis", {}).update(transcripts_per_policy=per, transcripts_saved=per)
    with tempfile.TemporaryDirectory() as tmp:
        sized = Path(tmp) / config.name
        sized.write_text(yaml.safe_dump(raw), encoding="utf-8")
        cfg = load_config(sized)
        start = time.process_time()
        run_from_config(sized, run)
        job_cpu = time.process_time() - start
    results = AuditWorldResults.read(run)
    ids, texts, groups = [], [], []
    for t in iter_transcripts(run / TRANSCRIPTS):
        ids.append(t.id)
        texts.append(strategy_summary(t))
        groups.append(t.metadata[POLICY])
    seeds = [_seed_of(i) for i in ids]

    assigned: dict[str, StrategyAssignment] = {}
    cpu: dict[str, float] = {}
    for classifier in ("lsa", "minilm"):
        start = time.process_time()
        assigned[classifier] = assign_strategies(texts, classifier=classifier)  # type: ignore[arg-type]
        cpu[classifier] = time.process_time() - start
    lsa, minilm = assigned["lsa"], assigned["minilm"]
    cat_a, cat_b = np.array(lsa.categories()), np.array(minilm.categories())
    same = cat_a == cat_b
    by_text = {t: bool(s) for t, s in zip(texts, same, strict=True)}
    report_labels = results.strategies.archetypes

    table = Table(
        title=f"Strategy labels, lsa vs minilm classifier, on {len(texts):,} AuditWorld transcripts "
        f"({cpu_name()}, one thread)"
    )
    table.add_column("measure")
    table.add_column("value", justify="right")
    for name, value in (
        ("transcripts (distinct summaries)", f"{len(texts):,} ({len(by_text):,})"),
        ("category agreement, per transcript", f"{100 * same.mean():.1f}%"),
        ("category agreement, per distinct summary", f"{100 * np.mean(list(by_text.values())):.1f}%"),
        (
            "archetype agreement, per transcript",
            f"{100 * np.mean(np.array(lsa.archetypes) == np.array(minilm.archetypes)):.1f}%",
        ),
        (
            "job report's archetype = lsa classifier's",
            f"{100 * np.mean([report_labels[i] == a for i, a in zip(ids, lsa.archetypes, strict=True)]):.1f}%",
        ),
        ("CPU: lsa / minilm classifier", f"{cpu['lsa']:.1f} s / {cpu['minilm']:.1f} s"),
        ("CPU: the job (training resumed from checkpoints when present)", f"{job_cpu:.0f} s"),
    ):
        table.add_row(name, value)
    console.print(table)

    per_group = Table(title="Category agreement and top category per auditor")
    for col in ("auditor", "agreement", "lsa: top category", "minilm: top category"):
        per_group.add_column(col)
    names = lsa.label_names("category")
    g = np.array(groups)

    def top(cats: np.ndarray, mask: np.ndarray) -> str:
        key, n = Counter(cats[mask].tolist()).most_common(1)[0]
        return f"{names[key]} ({100 * n / mask.sum():.0f}%)"

    for group in dict.fromkeys(groups):
        mask = g == group
        per_group.add_row(group, f"{100 * same[mask].mean():.0f}%", top(cat_a, mask), top(cat_b, mask))
    console.print(per_group)

    disagreements = Counter(
        (t, a, b) for t, a, b, s in zip(texts, lsa.archetypes, minilm.archetypes, same, strict=True) if not s
    )
    for (text, a, b), n in disagreements.most_common(show):
        console.print(f"[bold]{n}x[/bold] lsa {a} / minilm {b}: {escape(text)}", highlight=False)

    best = next((r.run for r in results.strategies.convergence if r.best), None)  # as the job chose it
    runs = [(d.name, d.design, d.benign_fraction) for d in cfg.designs]
    for classifier, labels in assigned.items():
        rows = strategy_convergence(labels, groups, runs, best, seeds)
        console.print(convergence_table(rows, labels).to_rich())
        console.print(f"({classifier} classifier)")


if __name__ == "__main__":
    typer.run(main)
