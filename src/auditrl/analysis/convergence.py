"""Which strategy categories each trained design's auditors converged on, beside what the paper reports.

The paper's findings (data/paper_strategies.yaml) name categories of the shipped codebook per reward
design: the best recipe converges on controlled experiments, binary on aggressive audits,
concerningness on auditing failures and pressured confessions. Each run of such a design, and the run
that scored best here, gets one row: the share of its transcripts in the paper's categories (with its
range over training seeds when the seeds are known), its own most common category, and whether the
paper's categories hold most of its transcripts. The check is a table of what emerged, whatever it is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cache

from pydantic import BaseModel, Field

from auditrl.analysis.assignment import StrategyAssignment
from auditrl.analysis.derivation import StudyTable
from auditrl.configfile import load_package_data

PAPER_FILE = "data/paper_strategies.yaml"
CONVERGED = 0.5
"""The paper's categories must hold more than this share of a run's transcripts for it to count as converged on them."""


class Expectation(BaseModel):
    design: str | None = Field(default=None, description="The reward design; None for the best run.")
    calibrated: bool | None = Field(
        default=None, description="Only runs with (true) or without (false) benign groups; None: both."
    )
    categories: list[str] = Field(min_length=1)
    finding: str = Field(min_length=1)

    def covers(self, design: str, benign_fraction: float) -> bool:
        return self.design == design and (self.calibrated is None or self.calibrated == (benign_fraction > 0))


class PaperStrategies(BaseModel):
    source: str
    expectations: list[Expectation]
    best: Expectation


@cache
def paper_strategies() -> PaperStrategies:
    return load_package_data(PaperStrategies, "auditrl.analysis", PAPER_FILE)


class ConvergenceRow(BaseModel):
    """One run checked against one of the paper's findings."""

    run: str
    design: str
    best: bool = Field(description="Checked as the run that scored best here, against the paper's best configuration.")
    finding: str
    expected: list[str] = Field(description="The paper's category ids.")
    share: float = Field(description="Share of the run's transcripts in those categories.")
    seed_shares: list[float] = Field(
        default_factory=list, description="The same share per training seed (empty when unknown)."
    )
    top: str = Field(description="The run's most common category id.")
    top_share: float
    transcripts: int

    @property
    def converged(self) -> bool:
        return self.share > CONVERGED


def strategy_convergence(
    assignment: StrategyAssignment,
    groups: Sequence[str],
    runs: Sequence[tuple[str, str, float]],
    best: str | None = None,
    seeds: Sequence[int] | None = None,
) -> list[ConvergenceRow]:
    """Rows for every run (name, design, benign fraction) the paper has a finding for, and for the `best` run.

    `groups` names the run of each assigned transcript; `seeds`, when given, its training seed.
    """
    paper = paper_strategies()
    known = {c.id for c in assignment.codebook.categories}
    for e in [*paper.expectations, paper.best]:
        missing = sorted(set(e.categories) - known)
        if missing:
            raise ValueError(
                f"{PAPER_FILE}: categories {', '.join(missing)} are not in the codebook the transcripts were "
                "classified with"
            )
    if len(groups) != len(assignment.archetypes) or (seeds is not None and len(seeds) != len(groups)):
        raise ValueError(
            f"strategy_convergence: {len(groups)} groups and {len(seeds or groups)} seeds for "
            f"{len(assignment.archetypes)} transcripts"
        )
    categories = assignment.categories()
    checks = [
        (name, design, e) for name, design, fraction in runs for e in paper.expectations if e.covers(design, fraction)
    ]
    checks += [(name, design, paper.best) for name, design, _ in runs if name == best]
    rows = []
    for name, design, e in checks:
        mine = [i for i, g in enumerate(groups) if g == name]
        if not mine:
            continue
        counts = Counter(categories[i] for i in mine)
        top, top_n = counts.most_common(1)[0]
        by_seed: dict[int, list[bool]] = {}
        if seeds is not None:
            for i in mine:
                by_seed.setdefault(seeds[i], []).append(categories[i] in e.categories)
        rows.append(
            ConvergenceRow(
                run=name,
                design=design,
                best=e is paper.best,
                finding=e.finding,
                expected=e.categories,
                share=sum(counts[c] for c in e.categories) / len(mine),
                seed_shares=[sum(v) / len(v) for _, v in sorted(by_seed.items())],
                top=top,
                top_share=top_n / len(mine),
                transcripts=len(mine),
            )
        )
    return rows


def convergence_table(rows: Sequence[ConvergenceRow], assignment: StrategyAssignment) -> StudyTable:
    """The check as a table of plain strings (terminal and HTML)."""
    names = assignment.label_names("category")

    def pct(x: float) -> str:
        return f"{100 * x:.0f}%"

    body = []
    for r in rows:
        spread = f" (seeds {pct(min(r.seed_shares))}-{pct(max(r.seed_shares))})" if len(r.seed_shares) > 1 else ""
        verdict = "as the paper" if r.converged else f"differs: mostly {names[r.top]} ({pct(r.top_share)})"
        body.append(
            [
                r.run + (" (best here)" if r.best else ""),
                " or ".join(names[c] for c in r.expected),
                pct(r.share) + spread,
                verdict,
                str(r.transcripts),
            ]
        )
    return StudyTable(
        title="Strategies beside the paper's finding",
        header=["run", "the paper: converges on", "share here", "verdict", "n"],
        rows=body,
        caption=f"The paper: {paper_strategies().source}. 'as the paper' when the paper's categories hold over "
        f"{pct(CONVERGED)} of the run's transcripts (share here, with its range over training seeds); categories from "
        f"the {assignment.classifier} classifier against the shipped codebook.",
    )
