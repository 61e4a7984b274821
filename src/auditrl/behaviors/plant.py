"""Build a target's hidden system prompt: the persona alone (benign) or the persona plus a plant.

Planted and benign targets share one persona so that an auditor cannot tell them apart by the
assistant's name or self-description; only the privileged block differs.
"""

from __future__ import annotations

import functools
from pathlib import Path
from string import Template
from typing import NamedTuple

from auditrl.behaviors.schema import Behavior

TEMPLATES_DIR = Path(__file__).parent / "data"


class Persona(NamedTuple):
    """The assistant identity every target presents, planted or not."""

    name: str
    developer: str


PERSONA = Persona("PRISM-4", "Nexus Research")


@functools.cache
def _template(file_name: str) -> Template:
    """A prompt template from the package data, read once."""
    return Template((TEMPLATES_DIR / file_name).read_text(encoding="utf-8").strip())


def render_benign(persona: Persona = PERSONA) -> str:
    """The system prompt of a benign target: the persona and nothing else."""
    return _template("benign_template.md").substitute(name=persona.name, developer=persona.developer)


def render_plant(behavior: Behavior, persona: Persona = PERSONA) -> str:
    """The full hidden system prompt of a target planted with `behavior`.

    The behavior's `instructions` text is inserted verbatim, so simulated targets can recognise
    the plant by searching for it.
    """
    return _template("plant_template.md").substitute(
        persona=render_benign(persona),
        name=persona.name,
        developer=persona.developer,
        instructions=behavior.instructions,
        cover_story=behavior.cover_story,
    )


def target_system_prompt(behavior: Behavior | None, persona: Persona = PERSONA) -> str:
    """The hidden system prompt for a target: planted when `behavior` is given, else benign."""
    return render_benign(persona) if behavior is None else render_plant(behavior, persona)
