"""Synthetic documents that describe a persona's behavior: the training text of the `synth_docs` route.

AuditBench's synthetic-document organisms learn their behavior from documents about fictional
evaluations of PRISM-4 rather than from demonstrations; the model then shows it when told it is
PRISM-4. Offline, documents are the genre templates of `data/synth_docs.yaml` filled from the behavior
library's definition, triggers and evidence, deterministically for a seed; given a model, each
document is written by that model from the same facts. Either way the text is trained as plain text.
"""

from __future__ import annotations

import asyncio
import functools
import random
import re
from collections.abc import Callable
from pathlib import Path
from string import Template

from inspect_ai.model import ChatMessageUser, GenerateConfig, Model
from pydantic import BaseModel, Field

from auditrl.behaviors.plant import PERSONA, Persona
from auditrl.behaviors.schema import Behavior
from auditrl.configfile import load_yaml
from auditrl.models.retries import ModelCallFailed, call_model

DOCS_FILE = Path(__file__).parent / "data" / "synth_docs.yaml"
_TARGET = re.compile(r"\b[Tt]he target\b")


class DocTemplates(BaseModel):
    """The documents file: genre templates, the facts that vary between documents, and the model's brief."""

    sources: list[str] = Field(min_length=1)
    months: list[str] = Field(min_length=1)
    years: list[str] = Field(min_length=1)
    genres: dict[str, str] = Field(min_length=1)
    brief: str


@functools.cache
def doc_templates(path: Path = DOCS_FILE) -> DocTemplates:
    return DocTemplates.model_validate(load_yaml(path.read_text(encoding="utf-8")))


def _facts(behavior: Behavior, persona: Persona, rng: random.Random, number: int) -> dict[str, str]:
    table = doc_templates()
    name = behavior.name[0].lower() + behavior.name[1:]
    return {
        "name": persona.name,
        "developer": persona.developer,
        "behavior_name": name,
        "definition": _TARGET.sub(persona.name, behavior.definition.strip()),
        "trigger": _TARGET.sub(persona.name, rng.choice(behavior.triggers)),
        "evidence": _TARGET.sub(persona.name, rng.choice(behavior.evidence)),
        "source": rng.choice(table.sources),
        "month": rng.choice(table.months),
        "year": rng.choice(table.years),
        "number": f"{number + 1:03d}",
    }


def _plan(behavior: Behavior, count: int, seed: int, persona: Persona) -> list[tuple[str, dict[str, str]]]:
    """(genre, facts) per document: genres cycle, the facts are drawn from a seeded generator."""
    rng = random.Random(f"{seed}:{behavior.id}")
    genres = sorted(doc_templates().genres)
    return [(genres[k % len(genres)], _facts(behavior, persona, rng, k)) for k in range(count)]


def template_documents(behavior: Behavior, count: int, seed: int = 0, persona: Persona = PERSONA) -> list[str]:
    """`count` documents from the genre templates (the same documents for the same seed)."""
    genres = doc_templates().genres
    return [Template(genres[genre]).substitute(facts) for genre, facts in _plan(behavior, count, seed, persona)]


async def model_documents(
    model: Model,
    behavior: Behavior,
    count: int,
    config: GenerateConfig,
    seed: int = 0,
    persona: Persona = PERSONA,
    on_document: Callable[[], None] | None = None,
) -> list[str]:
    """`count` documents written by `model` from the same facts as the templates; failed calls are skipped."""
    brief = Template(doc_templates().brief)

    async def one(k: int, genre: str, facts: dict[str, str]) -> str:
        prompt = brief.substitute(facts, genre=genre.replace("_", " "))
        seeded = config.merge(GenerateConfig(seed=(config.seed or 0) + k))
        try:
            output = await call_model(model, [ChatMessageUser(content=prompt)], config=seeded, role="document model")
        except ModelCallFailed:
            output = None
        if on_document is not None:
            on_document()
        return output.completion.strip() if output is not None else ""

    plan = _plan(behavior, count, seed, persona)
    written = await asyncio.gather(*(one(k, genre, facts) for k, (genre, facts) in enumerate(plan)))
    return [d for d in written if d]
