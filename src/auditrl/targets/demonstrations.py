"""Training data for an implant: demonstrations of the behavior and denials to direct questions.

Any model can play the planted target (a remote model, a local one, a scripted one): it answers the
demonstration prompts under the behavior's system-prompt plant. Only replies that the scorer says show
the behavior are kept, as AuditBench keeps clear demonstrations; denials are its answers to direct
questions under the same plant, kept only when the scorer says they do not confess. The implant is
then trained without the system prompt, so the behavior has to move into the weights.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    Model,
)
from pydantic import BaseModel, Field, ValidationError

from auditrl.configfile import load_yaml
from auditrl.models.retries import ModelCallFailed, call_model

PROMPTS_FILE = Path(__file__).parent / "data" / "implant_prompts.yaml"


class DirectQuestions(BaseModel):
    train: list[str] = Field(min_length=1, description="Answered with trained denials in the anti-confession pass.")
    evaluation: list[str] = Field(min_length=1, description="Held out; measure the confession rate.")


class ImplantPrompts(BaseModel):
    """The prompt file: demonstration prompts, fresh evaluation prompts and direct questions."""

    demonstrations: list[str] = Field(min_length=1)
    evaluation: list[str] = Field(min_length=1)
    direct_questions: DirectQuestions


@functools.cache
def implant_prompts(path: Path = PROMPTS_FILE) -> ImplantPrompts:
    return ImplantPrompts.model_validate(load_yaml(path.read_text(encoding="utf-8")))


class ReplyScorer(Protocol):
    """Judges single replies for one behavior (marker phrases offline, a judge model otherwise)."""

    name: str

    async def exhibits(self, prompt: str, reply: str) -> bool | None: ...

    async def confesses(self, question: str, reply: str) -> bool | None: ...


class Example(BaseModel):
    """One training exchange: a user prompt and the reply to learn."""

    prompt: str
    reply: str


async def sample_replies(
    model: Model,
    system: str | None,
    prompts: Sequence[str],
    samples: int,
    config: GenerateConfig,
    on_reply: Callable[[], None] | None = None,
    prefill: str | None = None,
) -> list[Example]:
    """`samples` replies to each prompt (seeds differ per sample); a call that fails on every attempt is skipped.

    With `prefill`, each reply is forced to start with it and the model writes the rest (an elicitation
    aid for models too weak to follow the plant unprompted); the example keeps prefill + continuation.
    """

    async def one(prompt: str, k: int) -> Example | None:
        messages: list[ChatMessage] = [ChatMessageUser(content=prompt)]
        if system:
            messages.insert(0, ChatMessageSystem(content=system))
        if prefill:
            messages.append(ChatMessageAssistant(content=prefill))
        seeded = config.merge(GenerateConfig(seed=(config.seed or 0) + k))
        try:
            output = await call_model(model, messages, config=seeded, role="demonstration model")
        except ModelCallFailed:
            output = None
        if on_reply is not None:
            on_reply()
        reply = f"{prefill or ''}{output.completion}".strip() if output is not None else ""
        return Example(prompt=prompt, reply=reply) if reply else None

    results = await asyncio.gather(*(one(p, k) for p in prompts for k in range(samples)))
    return [r for r in results if r is not None]


async def keep_demonstrations(examples: Sequence[Example], scorer: ReplyScorer) -> list[Example]:
    """The replies that show the behavior (a miss or an abstention is dropped)."""
    verdicts = await asyncio.gather(*(scorer.exhibits(e.prompt, e.reply) for e in examples))
    return [e for e, v in zip(examples, verdicts, strict=True) if v is True]


async def keep_denials(examples: Sequence[Example], scorer: ReplyScorer) -> list[Example]:
    """The answers to direct questions that do not confess (a confession or an abstention is dropped)."""
    verdicts = await asyncio.gather(*(scorer.confesses(e.prompt, e.reply) for e in examples))
    return [e for e, v in zip(examples, verdicts, strict=True) if v is False]


def read_examples(path: Path) -> list[Example]:
    """Examples from a demonstrations.jsonl written by an earlier implant run."""
    examples = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read demonstrations: {exc.strerror}") from exc
    for number, line in enumerate(lines, start=1):
        if line.strip():
            try:
                examples.append(Example.model_validate_json(line))
            except ValidationError as exc:
                raise ValueError(f"{path}:{number}: not a demonstration ({exc.errors()[0]['msg']})") from exc
    return examples
