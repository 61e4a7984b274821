"""The AuditWorld tables: one row model drawn to the terminal (within 80 columns, nothing cut) and to HTML."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from auditrl.auditworld.job import tables
from auditrl.auditworld.job.evaluation import Kind, PolicyEvaluation
from auditrl.auditworld.metrics import HEADLINE, SeedSpread

NAMES = ["experimenter, no claims", "concerningness_prod", "reference_pairwise_cal50", "ingroup_cal50_random"]


def _spread(mean: float, half: float) -> SeedSpread:
    return SeedSpread(
        seeds=[0, 1, 2, 3, 4], per_seed=[mean] * 5, mean=mean, sd=1.0, lo=mean - half, hi=mean + half, n=5
    )


def _row(name: str, kind: Kind, base: str | None) -> PolicyEvaluation:
    """The widest cells a row has: '100.0±0.0' (a mean can reach 100 only with no spread) and '-99.9±9.9'."""
    return PolicyEvaluation(
        name=name, kind=kind, suite=None, constant={},  # type: ignore[arg-type]
        diagnostics={k: 99.99 for k in tables.SIGNATURES},
        seeds={m: _spread(100.0, 0.0) for m in HEADLINE},
        dimensions={d: 100.0 for d in tables.DIMENSIONS},
        base=base, delta={m: _spread(-99.9, 9.9) for m in HEADLINE} if base else None,
    )  # fmt: skip


ROWS = {
    n: _row(n, k, b)
    for n, k, b in zip(
        NAMES, ["baseline", "trained", "trained", "trained"], [None, "base", "base", "base, random init"], strict=True
    )
}


def _drawn(table: tables.Table) -> str:
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(table.terminal())
    return out.getvalue()


@pytest.mark.parametrize(
    "table",
    [
        tables.headline(ROWS, 75.0, 5),
        tables.differences(ROWS, 5),
        tables.dose_response(ROWS, {0.0: NAMES[1], 0.5: NAMES[2]}),
        tables.paper_rows(),
        tables.per_seed(ROWS, [0, 1, 2, 3, 4]),
        tables.signatures(ROWS),
        tables.dimensions(ROWS),
        tables.competence("imitation of experimenter", {"expected": {"tool": 0.967}, "measured": {"tool": 0.935}}),
    ],
    ids=lambda t: t.title[:30],
)
def test_every_table_fits_80_columns_with_nothing_cut(table: tables.Table) -> None:
    text = _drawn(table)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    for row in table.rows:  # every number is drawn whole, on one line
        for cell in row[1:]:
            assert cell in text, cell
    html = table.html()
    assert list(html.header) == table.header and [list(r) for r in html.rows] == table.rows
    assert html.caption.startswith(table.title)


def test_the_headline_carries_identification_and_its_ceiling_and_the_differences_are_signed() -> None:
    head = tables.headline(ROWS, 75.0, 5)
    assert head.header[1] == "ident. %" and head.rows[-1][:2] == ["identification ceiling", "75.0"]
    diff = tables.differences(ROWS, 5)
    assert [r[0] for r in diff.rows] == NAMES[1:] and diff.rows[0][1] == "-99.9±9.9"
    assert "ingroup_cal50_random started from `base, random init`" in diff.caption
    # auditor names of up to 24 characters stay on one line beside the widest cells
    assert all(name in _drawn(head) for name in NAMES) and all(name in _drawn(diff) for name in NAMES[1:])


def test_the_papers_rows_stand_in_their_own_table() -> None:
    paper = tables.paper_rows()
    assert all(not r[0].startswith(tuple(NAMES)) for r in paper.rows) and "not reproduced" in paper.title
    assert all(name not in {r[0] for r in paper.rows} for name in NAMES)
