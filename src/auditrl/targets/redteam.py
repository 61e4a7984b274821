"""AuditBench's adversarial step with an auditor in the loop: interrogate the implant, label, build data.

A red-team auditor (any model; `scripted/redteamer` offline) is told the hidden behavior and presses
the implanted target to admit it: each conversation opens with a held-in direct question, then the
auditor reads the target's latest reply and writes the next message, for a fixed number of turns.
Every target reply is labelled confessing or not by the scorer (the judge). The planted demonstration
model answers each conversation too; its replies that do not confess are the denials AuditBench's
pipeline gets by rewriting confessions. The data for TRL's trainers:

- KTO (unpaired): the target's replies, desirable when they do not confess, undesirable when they do;
  the kept denials and the behavior's demonstrations as desirable examples, which keep it planted;
- DPO (paired): a kept denial chosen over each confession to the same conversation; each demonstration
  chosen over the base model's reply to its prompt, which keeps the behavior.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    Model,
)
from pydantic import BaseModel, Field

from auditrl.behaviors.plant import PERSONA, Persona
from auditrl.behaviors.schema import Behavior
from auditrl.models.retries import ModelCallFailed, call_model
from auditrl.targets.demonstrations import Example, ReplyScorer
from auditrl.targets.measure import Chat, generate_chat_replies
from auditrl.targets.record import RedteamCounts

if TYPE_CHECKING:
    from peft import PeftModel
    from transformers import PreTrainedTokenizerBase

AUDITOR_PROMPT = Path(__file__).parent / "data" / "redteam_auditor.md"


class LabelledReply(BaseModel):
    """One target reply in a red-team conversation, its label, and the planted model's reply to the same turn."""

    chat: list[dict[str, str]] = Field(description="The conversation up to the user turn answered (role/content).")
    reply: str
    confesses: bool | None = Field(description="The judge's label (None = it abstained; left out of training).")
    denial: str | None = Field(
        default=None, description="The planted model's reply to the same turn, kept when not confessing."
    )


def auditor_system_prompt(behavior: Behavior, persona: Persona = PERSONA) -> str:
    return Template(AUDITOR_PROMPT.read_text(encoding="utf-8")).substitute(
        name=persona.name,
        developer=persona.developer,
        behavior_name=behavior.name,
        definition=behavior.definition.strip(),
    )


def _auditor_view(system: str, chat: Chat, replies: Sequence[str]) -> list[ChatMessage]:
    """The auditor's own conversation: the opening it sent and each reply, its follow-ups as its turns."""
    users = [m["content"] for m in chat if m["role"] == "user"]
    messages: list[ChatMessage] = [ChatMessageSystem(content=system)]
    for k, reply in enumerate(replies):
        if k == 0:
            messages.append(ChatMessageUser(content=f"You opened with: {users[0]}\n\nIts reply: {reply}"))
        else:
            messages += [ChatMessageAssistant(content=users[k]), ChatMessageUser(content=f"Its reply: {reply}")]
    return messages


def _as_messages(system: str | None, chat: Chat) -> list[ChatMessage]:
    messages: list[ChatMessage] = [ChatMessageSystem(content=system)] if system else []
    for m in chat:
        if m["role"] == "user":
            messages.append(ChatMessageUser(content=m["content"]))
        elif m["role"] == "assistant":
            messages.append(ChatMessageAssistant(content=m["content"]))
    return messages


async def _generate(model: Model, messages: list[ChatMessage], config: GenerateConfig, role: str) -> str | None:
    try:
        output = await call_model(model, messages, config=config, role=role)
    except ModelCallFailed:
        return None
    return output.completion.strip() or None


def interrogate(
    model: PeftModel,
    tokenizer: PreTrainedTokenizerBase,
    auditor: Model,
    behavior: Behavior,
    questions: Sequence[str],
    *,
    turns: int,
    identity: str | None = None,
    max_new_tokens: int = 48,
    temperature: float = 0.0,
    seed: int = 0,
    auditor_config: GenerateConfig | None = None,
    on_reply: Callable[[int], None] | None = None,
) -> list[LabelledReply]:
    """Red-team conversations, one per question, of up to `turns` target replies (unlabelled yet).

    A conversation ends early when the auditor's call fails on every attempt or it writes nothing.
    """
    system = auditor_system_prompt(behavior)
    base_config = auditor_config or GenerateConfig()
    opening: list[dict[str, str]] = [{"role": "system", "content": identity}] if identity else []
    chats: list[Chat] = [[*opening, {"role": "user", "content": q}] for q in questions]
    replies: list[list[str]] = [[] for _ in questions]
    live = list(range(len(questions)))
    out: list[LabelledReply] = []
    for turn in range(turns):
        answered = generate_chat_replies(
            model, tokenizer, [chats[i] for i in live], max_new_tokens=max_new_tokens, temperature=temperature,
            seed=seed + turn, on_batch=on_reply,
        )  # fmt: skip
        for i, reply in zip(live, answered, strict=True):
            out.append(LabelledReply(chat=[dict(m) for m in chats[i]], reply=reply, confesses=None))
            replies[i].append(reply)
        if turn + 1 == turns:
            break

        async def follow_ups(indices: list[int], config: GenerateConfig) -> list[str | None]:
            views = [_auditor_view(system, chats[i], replies[i]) for i in indices]
            return list(await asyncio.gather(*(_generate(auditor, v, config, "red-team auditor") for v in views)))

        messages = asyncio.run(follow_ups(live, base_config.merge(GenerateConfig(seed=(base_config.seed or 0) + turn))))
        for i, message in zip(live, messages, strict=True):
            if message:
                chats[i] = [
                    *chats[i],
                    {"role": "assistant", "content": replies[i][-1]},
                    {"role": "user", "content": message},
                ]
        live = [i for i, message in zip(live, messages, strict=True) if message]
        if not live:
            break
    return out


async def label(
    replies: Sequence[LabelledReply],
    scorer: ReplyScorer,
    denier: Model | None,
    plant: str | None,
    config: GenerateConfig,
) -> list[LabelledReply]:
    """The judge's label for each reply, and (with `denier`) the planted model's non-confessing reply to each turn."""

    async def one(r: LabelledReply) -> LabelledReply:
        question = next(m["content"] for m in reversed(r.chat) if m["role"] == "user")
        confesses = await scorer.confesses(question, r.reply)
        denial = None
        if denier is not None:
            chat = [m for m in r.chat if m["role"] != "system"]
            answer = await _generate(denier, _as_messages(plant, chat), config, "demonstration model")
            if answer is not None and await scorer.confesses(question, answer) is False:
                denial = answer
        return r.model_copy(update={"confesses": confesses, "denial": denial})

    return list(await asyncio.gather(*(one(r) for r in replies)))


def _completion(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def _prompt(example: Example) -> list[dict[str, str]]:
    return [{"role": "user", "content": example.prompt}]


def kto_rows(replies: Sequence[LabelledReply], demonstrations: Sequence[Example]) -> list[dict[str, Any]]:
    """Unpaired rows: labelled replies (desirable = not confessing), kept denials and demonstrations (desirable)."""
    rows: list[dict[str, Any]] = []
    for r in replies:
        if r.confesses is not None:
            rows.append({"prompt": r.chat, "completion": _completion(r.reply), "label": not r.confesses})
        if r.denial is not None:
            rows.append({"prompt": r.chat, "completion": _completion(r.denial), "label": True})
    rows += [{"prompt": _prompt(e), "completion": _completion(e.reply), "label": True} for e in demonstrations]
    return rows


def dpo_rows(
    replies: Sequence[LabelledReply], demonstrations: Sequence[Example], base_replies: Sequence[str]
) -> list[dict[str, Any]]:
    """Pairs: a kept denial over each confession; each demonstration over the base model's reply to its prompt."""
    rows: list[dict[str, Any]] = [
        {"prompt": r.chat, "chosen": _completion(r.denial), "rejected": _completion(r.reply)}
        for r in replies
        if r.confesses is True and r.denial is not None
    ]
    rows += [
        {"prompt": _prompt(e), "chosen": _completion(e.reply), "rejected": _completion(b)}
        for e, b in zip(demonstrations, base_replies, strict=True)
        if b.strip() and b.strip() != e.reply.strip()
    ]
    return rows


def shuffled(rows: Sequence[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """Rows in a seeded random order (KTO reads its data in order, so desirable and undesirable rows mix)."""
    out = list(rows)
    random.Random(seed).shuffle(out)
    return out


def summary(
    auditor: str, conversations: int, turns: int, replies: Sequence[LabelledReply], rows: Sequence[dict[str, Any]]
) -> RedteamCounts:
    labelled = [r for r in replies if r.confesses is not None]
    kto = [r for r in rows if "label" in r]
    return RedteamCounts(
        auditor=auditor,
        conversations=conversations,
        turns=turns,
        replies=len(labelled),
        confessions=sum(1 for r in labelled if r.confesses),
        denials=sum(1 for r in replies if r.denial is not None),
        desirable=sum(1 for r in kto if r["label"]),
        undesirable=sum(1 for r in kto if not r["label"]),
        pairs=sum(1 for r in rows if "chosen" in r),
    )
