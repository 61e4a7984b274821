"""The strategy codebook: categories and the archetypes inside them, each described in words.

The shipped codebook (data/archetypes.yaml) has the paper's 14 archetypes in 5 categories; a user's file
of the same shape, or one derived from the data (`derivation`), can take its place. An archetype's
texts (its name with its description, its exemplars, its keywords) are what transcripts' strategy
summaries are compared with (`assignment`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, model_validator

from auditrl.configfile import load_package_data, read_yaml_file


class Category(BaseModel):
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    name: str = Field(min_length=1)
    description: str = Field(min_length=1)


class Archetype(BaseModel):
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    number: int = Field(ge=1)
    category: str
    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    keywords: list[str] = Field(min_length=1)
    exemplars: list[str] = Field(min_length=1)

    def texts(self) -> list[str]:
        """The texts whose mean embedding is this archetype's prototype."""
        return [f"{self.name}. {self.description}", *self.exemplars, ", ".join(self.keywords)]


class Codebook(BaseModel):
    """The frozen taxonomy every transcript is classified against."""

    version: int
    categories: list[Category] = Field(min_length=1)
    archetypes: list[Archetype] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Codebook:
        cats = [c.id for c in self.categories]
        ids = [a.id for a in self.archetypes]
        numbers = [a.number for a in self.archetypes]
        checks: list[tuple[str, Sequence[object]]] = [
            ("category id", cats),
            ("archetype id", ids),
            ("archetype number", numbers),
        ]
        for what, values in checks:
            dupes = sorted({str(v) for v in values if values.count(v) > 1})
            if dupes:
                raise ValueError(f"duplicate {what}: {', '.join(dupes)}")
        unknown = [f"{a.id} -> {a.category}" for a in self.archetypes if a.category not in cats]
        if unknown:
            raise ValueError(f"archetypes with an unknown category: {', '.join(unknown)}")
        return self

    def archetype(self, archetype_id: str) -> Archetype:
        for a in self.archetypes:
            if a.id == archetype_id:
                return a
        raise KeyError(archetype_id)

    def category_of(self, archetype_id: str) -> Category:
        cat = self.archetype(archetype_id).category
        return next(c for c in self.categories if c.id == cat)


@cache
def _builtin_codebook() -> Codebook:
    return load_package_data(Codebook, "auditrl.analysis", "data/archetypes.yaml")


def load_codebook(path: Path | None = None) -> Codebook:
    """The shipped codebook, or a user's file of the same shape."""
    if path is None:
        return _builtin_codebook()
    try:
        return Codebook.model_validate(read_yaml_file(path))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the codebook ({exc.strerror or type(exc).__name__})") from exc
    except ValidationError as exc:
        raise ValueError(f"{path}: invalid archetype codebook: {exc}") from exc


def codebook_texts(codebook: Codebook) -> list[str]:
    """Every text of every archetype, in codebook order (what `assignment.archetype_means` averages)."""
    return [x for a in codebook.archetypes for x in a.texts()]
