"""Judge prompt templates and rubric dimensions, read from package files so wording is data, not code.

Rubric dimensions use Petri's dimension-file format: markdown with YAML front matter holding `name` and
`description`, and the rubric as the body. Users can point the concerningness judge at a directory of
Petri dimension files to bring their own rubrics.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path

import jinja2
import yaml
from pydantic import BaseModel, Field, ValidationError

from auditrl.configfile import ConfigFileError, load_yaml, read_user_text

_PACKAGE = "auditrl.judges"
_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)


class DimensionFileError(ValueError):
    """A rubric dimension file that cannot be used; the message names the file and the problem."""


class Dimension(BaseModel):
    """One scored dimension: identifier, one-line description and the rubric text."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = Field(min_length=1)
    rubric: str = ""
    source: str | None = Field(default=None, exclude=True)


@cache
def _template_text(name: str) -> str:
    return resources.files(_PACKAGE).joinpath("prompts", f"{name}.md").read_text(encoding="utf-8")


def render_prompt(name: str, **variables: object) -> str:
    """Fill prompt template `prompts/<name>.md`; variables are inserted as plain text, never evaluated."""
    return _ENV.from_string(_template_text(name)).render(**variables).strip() + "\n"


def prompt_nonce(*parts: str) -> str:
    """A marker derived from the judge input: text inside a transcript cannot predict it in advance."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
    return digest[:12]


def parse_dimension_text(text: str, source: str) -> Dimension:
    """Parse one dimension file (front matter + rubric body); the stem names it when `name` is absent."""
    if not text.startswith("---"):
        raise DimensionFileError(f"{source}: missing YAML front matter (the file must start with '---')")
    parts = text.split("---", 2)
    if len(parts) < 3:
        raise DimensionFileError(f"{source}: front matter is not closed with a second '---' line")
    try:
        meta = load_yaml(parts[1]) or {}
    except yaml.YAMLError as exc:
        raise DimensionFileError(f"{source}: front matter is not valid YAML: {exc}") from exc
    if not isinstance(meta, dict):
        raise DimensionFileError(f"{source}: front matter must be a mapping, got {type(meta).__name__}")
    meta.setdefault("name", Path(source).stem)
    try:
        return Dimension(
            name=meta["name"],
            description=str(meta.get("description", "")).strip(),
            rubric=parts[2].strip(),
            source=source,
        )
    except ValidationError as exc:
        fields = ", ".join(f"{'.'.join(map(str, e['loc']))}={e.get('input')!r}" for e in exc.errors())
        raise DimensionFileError(f"{source}: invalid field(s) {fields}") from exc


def _dimension_text(path: Path) -> str:
    """A dimension file's text, bounded like every file a user writes; a problem names the file."""
    try:
        return read_user_text(path)
    except ConfigFileError as exc:
        raise DimensionFileError(str(exc)) from None


def load_dimension_files(paths: Sequence[Path]) -> list[Dimension]:
    """Read dimension files; a directory contributes every `*.md` file in it, sorted by name."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(path.rglob("*.md")))
        elif path.is_file():
            files.append(path)
        else:
            raise DimensionFileError(f"{path}: no such dimension file or directory")
    return [parse_dimension_text(_dimension_text(f), str(f)) for f in files]


@cache
def builtin_dimensions(group: str) -> tuple[Dimension, ...]:
    """The packaged rubric set `rubrics/<group>/` (e.g. "concerningness", "audit_quality")."""
    folder = resources.files(_PACKAGE).joinpath("rubrics", group)
    entries = sorted((e for e in folder.iterdir() if e.name.endswith(".md")), key=lambda e: e.name)
    if not entries:
        raise DimensionFileError(f"rubrics/{group}: no packaged dimension files")
    return tuple(parse_dimension_text(e.read_text(encoding="utf-8"), f"rubrics/{group}/{e.name}") for e in entries)


def select_dimensions(dimensions: Sequence[Dimension], names: Sequence[str]) -> list[Dimension]:
    """The dimensions named, in that order; a missing name is an error naming what is available."""
    by_name = {d.name: d for d in dimensions}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise DimensionFileError(f"dimension(s) {missing} not found; available: {sorted(by_name)}")
    return [by_name[n] for n in names]
