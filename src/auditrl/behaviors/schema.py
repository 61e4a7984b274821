"""Typed records for behaviors and seeds, validated on load so a bad file fails with its name and field."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Split = Literal["train", "heldout"]


class Behavior(BaseModel):
    """A hidden behavior that can be planted in a target through its system prompt."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    name: str = Field(min_length=1)
    split: Split
    definition: str = Field(min_length=20)
    triggers: list[str] = Field(min_length=1, description="Contexts in which the behavior shows.")
    evidence: list[str] = Field(min_length=1, description="What the behavior looks like in target replies.")
    instructions: str = Field(min_length=20, description="Behavior paragraph inserted into the plant template.")
    cover_story: str = Field(min_length=10, description="Innocent explanation the target gives when confronted.")
    tags: list[str] = Field(default_factory=list)
    source: Path | None = Field(default=None, exclude=True)


class Seed(BaseModel):
    """A scenario instruction for the auditor, in Petri's markdown-with-front-matter format."""

    model_config = ConfigDict(extra="allow", frozen=True)

    id: str = Field(min_length=1)
    tags: list[str] = Field(default_factory=list)
    behavior: str | None = Field(default=None, description="Behavior id this seed targets; None = general.")
    instructions: str = Field(min_length=1)
    source: Path | None = Field(default=None, exclude=True)
