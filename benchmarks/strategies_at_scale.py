"""`auditrl strategies` at the paper's scale: wall time and peak memory for 81,000 transcripts.

Generates the transcripts with AuditWorld (the three scripted baselines and untrained MLP auditors with different
initialisations, against planted and benign targets of four families, 15- and 30-turn budgets), writes them as one JSONL
file, then runs the whole command on it in a fresh process: reading and summarising every transcript, embedding (auto
picks LSA at this size), base clustering at k = n/100, contrastive naming, the roll-up into strategies, archetypes and
categories, the reclassification against the frozen codebook, bootstrap stability and the comparison with the shipped
codebook. With `--compare-classifiers` it then gives every transcript its archetype with both classifiers of
`auditrl.analysis.assignment` (lsa, the command's default, and minilm) and reports how often their categories agree.
Generation is not timed. The figures are the command's CPU time (user + system; the command runs on one thread, so on an
idle core this is its wall time), its wall time as measured here (longer when other work shares the cores), and its peak
resident memory.

    python benchmarks/strategies_at_scale.py --transcripts 81000
    python benchmarks/strategies_at_scale.py --transcripts 6000 --compare-classifiers
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from auditrl.analysis.assignment import assign_strategies
from auditrl.analysis.summaries import strategy_summary
from auditrl.auditworld.policies import MLPPolicy, baselines
from auditrl.auditworld.render import render_episodes
from auditrl.auditworld.simulate import simulate
from auditrl.auditworld.world import World, training_batch
from auditrl.behaviors.library import load_behaviors
from auditrl.scaffold.store import iter_transcripts

FAMILIES = [0, 1, 2, 3]
GROUP_SIZE = 8


def generate(path: Path, n: int, seed: int) -> None:
    """Write about `n` AuditWorld transcripts to `path`, spread evenly over the auditors and two budgets."""
    world = World.build(load_behaviors())
    rng = np.random.default_rng(seed)
    auditors = [(type(p).__name__, p) for p in baselines()] + [
        (f"mlp{s}", MLPPolicy(hidden=32, seed=s)) for s in range(5)
    ]
    cells = [(name, policy, turns) for name, policy in auditors for turns in (15, 30)]
    groups = max(1, round(n / (len(cells) * GROUP_SIZE)))
    with path.open("w", encoding="utf-8") as out, Progress() as progress:
        task = progress.add_task("generating AuditWorld transcripts", total=len(cells))
        for name, policy, turns in cells:
            batch = training_batch(world, rng, groups, GROUP_SIZE, 0.5, FAMILIES, turns)
            rollout = simulate(world, batch, policy, rng)
            for t in render_episodes(world, rollout, np.arange(batch.size), name, f"t{turns}"):
                out.write(t.model_dump_json() + "\n")
            progress.advance(task)


def main(
    transcripts: int = typer.Option(81_000, help="How many transcripts to generate and cluster."),
    seed: int = typer.Option(0, help="Generation and clustering seed."),
    keep: Path | None = typer.Option(
        None, help="Keep the generated file and the command's JSON in this folder (and reuse a file already there)."
    ),
    compare_classifiers: bool = typer.Option(
        False, help="Also compare the lsa and minilm classifiers' categories on every transcript."
    ),
    embedder: str = typer.Option(
        "auto",
        help="The command's --embedder. auto takes LSA at the paper's scale and MiniLM below 1,000 distinct summaries, "
        "so a small run that should take the scaled run's path names lsa.",
    ),
) -> None:
    console = Console()
    folder = Path(keep) if keep is not None else Path(tempfile.mkdtemp(prefix="strategies-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    data, result = folder / "transcripts.jsonl", folder / "strategies.json"
    if not (keep is not None and data.exists()):
        generate(data, transcripts, seed)
    command = [
        sys.executable,
        "-m",
        "auditrl.cli",
        "strategies",
        str(data),
        "--random-seed",
        str(seed),
        "--embedder",
        embedder,
        "--json",
        str(result),
    ]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu, peak_kib = usage.ru_utime + usage.ru_stime, usage.ru_maxrss
    if done.returncode != 0:
        console.print(done.stdout[-3000:], done.stderr[-3000:], markup=False)
        raise typer.Exit(1)
    out = json.loads(result.read_text(encoding="utf-8"))
    derived = out["derived"]
    stab = derived["stability"]
    table = Table(
        title=f"auditrl strategies on {len(out['labels']):,} AuditWorld transcripts (one process, OMP_NUM_THREADS=1)"
    )
    table.add_column("measure")
    table.add_column("value", justify="right")
    rows = [
        ("CPU time (read, summarise, embed, cluster, derive, reclassify, stability)", f"{cpu:.1f} s"),
        ("wall time here (includes waiting for shared cores)", f"{wall:.1f} s"),
        ("peak resident memory", f"{peak_kib / 2**20:.2f} GiB"),
        ("file size", f"{data.stat().st_size / 2**30:.2f} GiB"),
        ("embedder", out["embedder"]),
        ("base clusters (k asked / non-empty)", f"{out['k']} / {len(out['clusters'])}"),
        (
            "strategies / archetypes / categories",
            f"{len(derived['derived']['strategies'])} / {len(derived['derived']['archetypes'])} / "
            f"{len(derived['derived']['categories'])}",
        ),
        ("reclassified = roll-up archetype", f"{100 * derived['agreement']:.1f}%"),
        (
            "derived vs shipped archetypes: ARI / AMI",
            f"{derived['comparison']['archetype_ari']:.3f} / {derived['comparison']['archetype_ami']:.3f}",
        ),
    ]
    if compare_classifiers:
        texts = [strategy_summary(t) for t in iter_transcripts(data)]
        start = time.process_time()
        minilm = assign_strategies(texts, classifier="minilm")
        minilm_cpu = time.process_time() - start
        lsa = assign_strategies(texts)
        same = np.array(lsa.categories()) == np.array(minilm.categories())
        by_text = dict(zip(texts, same, strict=True))
        rows += [
            ("lsa and minilm classifiers: same category, per transcript (per distinct summary)",
             f"{100 * same.mean():.1f}% ({100 * np.mean(list(by_text.values())):.1f}% of {len(by_text):,})"),
            ("minilm classifier CPU time", f"{minilm_cpu:.1f} s"),
        ]  # fmt: skip
    if stab is None:
        rows.append(("stability", derived["too_few"]))
    else:
        jac = np.asarray(stab["jaccard"])
        rows += [
            ("silhouette base / archetypes", f"{stab['silhouette']:.3f} / {stab['silhouette_archetypes']:.3f}"),
            ("bootstrap ARI per seed", ", ".join(f"{a:.3f}" for a in stab["bootstrap_ari"])),
            ("per-cluster Jaccard mean; share >= 0.75", f"{jac.mean():.3f}; {100 * (jac >= 0.75).mean():.0f}%"),
        ]
    for row in rows:
        table.add_row(*row)
    console.print(table)
    if keep is None:
        data.unlink()
        result.unlink()
        folder.rmdir()


if __name__ == "__main__":
    typer.run(main)
