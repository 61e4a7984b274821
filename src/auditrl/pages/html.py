"""One self-contained HTML file per page: inline CSS, figures as base64 PNG, every string escaped.

Pages quote transcripts, and model output is untrusted, so all text goes through jinja2's autoescape;
nothing is ever inserted as markup.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import jinja2
from matplotlib.figure import Figure
from rich.table import Table as RichTable
from rich.text import Text

from auditrl.atomic import atomic_write_text
from auditrl.pages.transcript_view import transcript_view
from auditrl.scaffold.transcript import Transcript

Cell = str | int | float | None
SHORT_CELL = 24
"""Cells up to this many characters never wrap (a number with its interval stays on one line); wide
tables scroll inside their own container instead of widening the page."""
PREVIEW_CHARS = 160
"""Characters of a folded long message shown before it is opened."""


@dataclass
class TableBlock:
    """A table as a header and rows of plain values; values are escaped when rendered."""

    header: Sequence[str]
    rows: Sequence[Sequence[Cell]]
    caption: str = ""

    def __post_init__(self) -> None:
        for i, row in enumerate(self.rows):
            if len(row) != len(self.header):
                raise ValueError(
                    f"table {self.caption or self.header!r}: row {i} has {len(row)} cells, header has "
                    f"{len(self.header)}"
                )

    @classmethod
    def from_rich(cls, table: RichTable) -> TableBlock:
        """The same table as a terminal command prints it, as plain text (markup read, never passed on as HTML)."""
        header = [_plain(c.header) for c in table.columns]
        columns = [[_plain(cell) for cell in c.cells] for c in table.columns]
        caption = ". ".join(_plain(t) for t in (table.title, table.caption) if t)
        return cls(header=header, rows=[list(row) for row in zip(*columns, strict=True)], caption=caption)


def _plain(value: object) -> str:
    """A rich cell as text: markup strings parsed, `Text` taken as is, lines kept."""
    if isinstance(value, Text):
        return value.plain
    return Text.from_markup(value).plain if isinstance(value, str) else str(value)


@dataclass
class FigureBlock:
    """A figure with a caption that explains how to read it (shown under the figure's title)."""

    figure: Figure
    caption: str = ""


@dataclass
class Section:
    """A titled part of a report: paragraphs, tables, matplotlib figures, preformatted blocks and transcripts.

    `archetypes` names the strategy archetype of each transcript (by id) that a strategy analysis classified.
    """

    title: str
    paragraphs: Sequence[str] = field(default_factory=list)
    tables: Sequence[TableBlock] = field(default_factory=list)
    figures: Sequence[Figure | FigureBlock] = field(default_factory=list)
    preformatted: Sequence[str] = field(default_factory=list)
    transcripts: Sequence[Transcript] = field(default_factory=list)
    archetypes: Mapping[str, str] = field(default_factory=dict)


@dataclass
class _Image:
    data: str
    alt: str
    caption: str = ""


def _image(item: Figure | FigureBlock) -> _Image:
    block = item if isinstance(item, FigureBlock) else FigureBlock(item)
    return _Image(figure_png_base64(block.figure), _figure_caption(block.figure), block.caption)


def _cell(value: Cell) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def figure_png_base64(fig: Figure, dpi: int = 110) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _figure_caption(fig: Figure) -> str:
    suptitle = fig.get_suptitle()
    if suptitle:
        return suptitle
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    return titles[0] if titles else ""


def _template() -> jinja2.Template:
    source = resources.files("auditrl.pages").joinpath("templates/page.html.j2").read_text(encoding="utf-8")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return env.from_string(source)


def render_page(title: str, sections: Sequence[Section]) -> str:
    """The HTML text of a report (escaped throughout)."""
    rendered = [
        {
            "title": s.title,
            "paragraphs": list(s.paragraphs),
            "tables": [
                {"header": list(t.header), "rows": [[_cell(c) for c in r] for r in t.rows], "caption": t.caption}
                for t in s.tables
            ],
            "images": [_image(f) for f in s.figures],
            "preformatted": list(s.preformatted),
            "transcripts": [transcript_view(t, s.archetypes.get(t.id)) for t in s.transcripts],
        }
        for s in sections
    ]
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return _template().render(
        title=title, sections=rendered, generated=generated, short_cell=SHORT_CELL, preview_chars=PREVIEW_CHARS
    )


def write_page(path: Path, title: str, sections: Sequence[Section]) -> Path:
    """Render the report and write it atomically."""
    return atomic_write_text(Path(path), render_page(title, sections))
