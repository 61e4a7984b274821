"""`--html FILE` and `--json FILE` of every command that prints results: checked before any work, written last.

Each command hands over what it printed (its rich tables, or report sections of its own) and the results
as JSON; a file that cannot be written is one error line, and nothing already written is lost.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from auditrl.atomic import OutputError, atomic_write_text, check_output
from auditrl.cli.errors import FAILURE, fail

if TYPE_CHECKING:
    from rich.table import Table

    from auditrl.pages.html import Section
    from auditrl.scaffold.transcript import Transcript


def written(write: Callable[[], Path], what: str) -> Path:
    """Run `write`; a disk that fails now (full, gone read-only) is one error line, with nothing earlier lost."""
    try:
        return write()
    except OSError as exc:
        raise fail(f"{what} could not be written ({exc.strerror or exc}); the inputs are unchanged", FAILURE) from exc


def json_text(data: Any) -> str:
    """Results as indented JSON (pydantic models and paths included)."""
    from pydantic_core import to_jsonable_python

    return json.dumps(to_jsonable_python(data, serialize_unknown=True), indent=2) + "\n"


def table_section(title: str, tables: Iterable[Table], notes: Sequence[str] = ()) -> Section:
    """A report section of the tables a command printed, with the same rows and cells."""
    from auditrl.pages.html import Section, TableBlock

    return Section(title=title, paragraphs=list(notes), tables=[TableBlock.from_rich(t) for t in tables])


def transcripts_part(transcripts: Sequence[Transcript]) -> Section:
    """A few of the command's transcripts to read in full (auditrl.pages.sections.transcripts_section)."""
    from auditrl.pages.sections import transcripts_section

    return transcripts_section(transcripts)


@dataclass(frozen=True)
class ReportFiles:
    """The `--html` and `--json` files of one command run (either may be None)."""

    html: Path | None
    json: Path | None

    def check(self, inputs: Sequence[Path] = ()) -> None:
        """Refuse, before any work, a file that could not be written or would overwrite an input."""
        try:
            for option, path in (("--html", self.html), ("--json", self.json)):
                if path is not None:
                    check_output(path, f"{option} {path}", inputs=tuple(inputs))
        except OutputError as exc:
            raise fail(str(exc)) from exc

    def write(
        self,
        console: Console,
        title: str,
        sections: Callable[[], Sequence[Section]],
        results: Callable[[], str],
    ) -> None:
        """Write the report (`sections`, built only when asked for) and the results JSON, and say where."""
        if self.json is not None:
            path = self.json
            written(lambda: atomic_write_text(path, results()), "--json")
            console.print(f"Results JSON: {escape(str(path))}", highlight=False, soft_wrap=True)
        if self.html is not None:
            from auditrl.pages.html import write_page

            page = self.html
            written(lambda: write_page(page, title, sections()), "--html")
            console.print(f"Page: {escape(str(page))}", highlight=False, soft_wrap=True)
