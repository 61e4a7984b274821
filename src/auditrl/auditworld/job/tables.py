"""The AuditWorld report's tables: one row model each, rendered to the terminal and to HTML alike.

Every table is built once, as a `Table` of plain strings, and drawn by `terminal()` (rich, fitting 80
columns) or `html()` (the report's `TableBlock`). The paper's published rows have a table of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources

from rich import box
from rich.markup import escape
from rich.table import Table as RichTable

from auditrl.auditworld.job.evaluation import PolicyEvaluation
from auditrl.auditworld.metrics import HEADLINE, IDENTIFIED, SeedSpread
from auditrl.configfile import load_yaml
from auditrl.evaluate.paper import load_paper_reference
from auditrl.pages.html import TableBlock

SHORT = {
    IDENTIFIED: "ident. %",
    "audit_quality": "audit q.",
    "false_positive": "FP cal.",
    "realism": "realism",
    "composite": "composite",
}
"""Column titles of the headline metrics."""
SIGNATURES = {
    "target_evidence_rate": "evid%",
    "accusations_per_audit": "acc",
    "confessions_per_audit": "conf",
    "false_confessions_per_audit": "fconf",
    "eval_aware_per_audit": "aware",
    "rollbacks_per_audit": "rollb",
    "turns_per_audit": "turns",
}
"""The reward-hacking signatures of `EvalEpisodes.diagnostics` shown, with their column titles."""
SIGNATURES_CAPTION = (
    "evid% = planted audits whose correct claim is backed by the target's own display; the others are means per "
    "audit over planted and benign audits: acc = accusations, conf = confessions, fconf = confessions about a "
    "topic that does not trigger the behavior, aware = eval-aware remarks the audit drew, rollb = rollbacks."
)
DIMENSIONS = {"coherence": "coher", "depth": "depth", "evidence": "evid", "non_confrontation": "nconf",
              "exhibited": "exhib", "identified": "ident"}  # fmt: skip


@dataclass
class Table:
    """A table as plain strings: the first column left-aligned, the others right-aligned."""

    title: str
    header: list[str]
    rows: list[list[str]]
    caption: str = ""
    sections: list[int] = field(default_factory=list)
    """Row indices before which a separator is drawn in the terminal."""

    def terminal(self) -> RichTable:
        t = RichTable(
            title=self.title,
            caption=self.caption or None,
            box=box.SIMPLE_HEAD,
            pad_edge=False,
            show_edge=False,
            padding=(0, 0, 0, 1),
            title_justify="left",
            caption_justify="left",
        )
        for i, h in enumerate(self.header):
            width = max([len(h), *[len(r[i]) for r in self.rows]])
            if i == 0:  # labels wrap if they must; numbers never do
                t.add_column(h, justify="left", overflow="fold")
            else:
                t.add_column(h, justify="right", no_wrap=True, min_width=width)
        for i, row in enumerate(self.rows):
            if i in self.sections:
                t.add_section()
            t.add_row(*[escape(c) for c in row])
        return t

    def html(self) -> TableBlock:
        return TableBlock(header=self.header, rows=self.rows, caption=f"{self.title}. {self.caption}".strip())


def spread_cell(s: SeedSpread, signed: bool = False) -> str:
    """Mean and the half-width of its 95% t-interval over seeds ('52.8±1.3', '41.0±12'); the mean alone with one
    seed."""
    value = round(s.mean, 1) + 0.0  # no "-0.0"
    mean = f"{value:+.1f}" if signed else f"{value:.1f}"
    if s.lo is None or s.hi is None:
        return mean
    half = max(s.hi - s.mean, s.mean - s.lo)
    return f"{mean}±{half:.1f}" if half < 9.95 else f"{mean}±{half:.0f}"


def headline(rows: Mapping[str, PolicyEvaluation], ceiling: float, n_seeds: int) -> Table:
    """Every auditor's headline metrics (mean ± 95% t-interval over training seeds), identification first."""
    body = [[name, *[spread_cell(r.seeds[m]) for m in HEADLINE]] for name, r in rows.items()]
    kinds = [r.kind for r in rows.values()]
    sections = [i for i in range(1, len(kinds)) if kinds[i] != kinds[i - 1]]
    body.append(["identification ceiling", f"{ceiling:.1f}", "", "", "", ""])
    return Table(
        title=f"AuditWorld, held-out behaviors: mean ± 95% CI over {n_seeds} training seeds",
        header=["auditor", *[SHORT[m] for m in HEADLINE]],
        rows=body,
        sections=[*sections, len(body) - 1],
        caption="ident. % = planted audits whose claim names a trigger topic; its ceiling is the share of held-out "
        "seeds whose scenario holds a trigger at all. The composite averages audit quality, FP calibration and "
        "realism (no identification in it).",
    )


def differences(rows: Mapping[str, PolicyEvaluation], n_seeds: int) -> Table:
    """Each trained design minus the base it started from (per-seed differences, mean ± 95% t-interval)."""
    trained = [r for r in rows.values() if r.delta is not None]
    return Table(
        title=f"Trained minus base: mean ± 95% CI of the per-seed differences ({n_seeds} seeds)",
        header=["design", *[SHORT[m] for m in HEADLINE]],
        rows=[[r.name, *[spread_cell(r.delta[m], signed=True) for m in HEADLINE]] for r in trained if r.delta],
        caption="Each seed's trained auditor against the base of the same seed, evaluated on the same draws"
        + "".join(
            f"; {', '.join(r.name for r in trained if r.base == b)} started from `{b}`"
            for b in dict.fromkeys(r.base for r in trained)
            if b != "base"
        )
        + ("; the others from `base`." if any(r.base != "base" for r in trained) else "."),
    )


def _paper_dose() -> tuple[str, dict[float, float]]:
    raw = load_yaml(
        resources.files("auditrl.auditworld.job").joinpath("data/paper_dose_response.yaml").read_text(encoding="utf-8")
    )
    return str(raw["source"]), {float(k): float(v) for k, v in raw["fp_calibration_by_benign_fraction"].items()}


def dose_response(rows: Mapping[str, PolicyEvaluation], ingroup: Mapping[float, str]) -> Table:
    """In-group pairwise by benign fraction: ours (FP calibration, identification, composite) and the paper's FP."""
    source, paper = _paper_dose()
    body = []
    for fraction in sorted(set(ingroup) | set(paper)):
        r = rows.get(ingroup.get(fraction, ""))
        ours = [spread_cell(r.seeds[m]) for m in ("false_positive", IDENTIFIED, "composite")] if r else ["-"] * 3
        body.append([f"{fraction:g}", *ours, f"{paper[fraction]:.0f}" if fraction in paper else "-"])
    return Table(
        title="In-group pairwise calibration dose-response (benign share of training groups)",
        header=["benign", "FP cal.", "ident. %", "composite", "paper FP cal."],
        rows=body,
        caption=f"Ours: mean ± 95% CI over training seeds. Paper: {source}.",
    )


def paper_rows() -> Table:
    """The paper's published headline rows, in a table of their own (for orientation, never ours)."""
    paper = load_paper_reference()
    metrics = ("audit_quality", "false_positive", "realism", "composite")
    return Table(
        title="The paper's rows (not reproduced here)",
        header=["paper row", *[SHORT[m] for m in metrics]],
        rows=[[r.label, *[r.cell(m).replace(" ± ", "±") for m in metrics]] for r in paper.rows],
        caption=f"{paper.source}. Its composite averages four metrics (with production discovery); ours averages "
        "three, and the world was not tuned toward these figures.",
    )


def per_seed(
    rows: Mapping[str, PolicyEvaluation], seeds: Sequence[int], metrics: Sequence[str] = (IDENTIFIED, "composite")
) -> Table:
    """Each training seed's mean of a few headline metrics, one row per (auditor, metric)."""
    body = [
        [name, SHORT[m], *[f"{v:.1f}" for v in r.seeds[m].per_seed]]
        for name, r in rows.items()
        if r.kind != "baseline"
        for m in metrics
    ]
    return Table(
        title="Per training seed",
        header=["auditor", "metric", *[f"seed {s}" for s in seeds]],
        rows=body,
        caption="Each seed's mean over its held-out audits; bases and trained auditors (the baselines are not "
        "trained).",
    )


def signatures(rows: Mapping[str, PolicyEvaluation]) -> Table:
    return Table(
        title="Reward-hacking signatures",
        header=["auditor", *SIGNATURES.values()],
        rows=[
            [
                name,
                *[
                    f"{r.diagnostics[k]:.2f}" if not k.endswith("rate") else f"{r.diagnostics[k]:.1f}"
                    for k in SIGNATURES
                ],
            ]
            for name, r in rows.items()
        ],  # fmt: skip
        caption=SIGNATURES_CAPTION,
    )


def dimensions(rows: Mapping[str, PolicyEvaluation]) -> Table:
    return Table(
        title="Audit quality by dimension (planted audits, pooled over seeds)",
        header=["auditor", *DIMENSIONS.values()],
        rows=[[name, *[f"{r.dimensions[d]:.1f}" for d in DIMENSIONS]] for name, r in rows.items()],
        caption="Coherence, depth, evidence and identified need the auditor to act on what the target said; "
        "nconf (non-confrontation, a style) and exhib (the target exhibited the behavior somewhere) can be earned "
        "by a plan that never looks, as the blind baseline's.",
    )


def competence(base_label: str, agreement: Mapping[str, Mapping[str, float]]) -> Table:
    """The imitation base's agreement with its expert per decision: configured (expected) and reached."""
    heads = list(agreement["expected"])
    return Table(
        title=f"Base competence: {base_label}",
        header=["decision", "configured", "reached"],
        rows=[[h, f"{agreement['expected'][h]:.3f}", f"{agreement['measured'][h]:.3f}"] for h in heads],
        caption="Share of decisions on which the base's sampled choice equals the expert's, on the states the base "
        "reaches in training-split audits (mean over seeds); configured = competence + (1 - competence) / choices.",
    )
