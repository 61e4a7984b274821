"""The words of AuditWorld: topics, message templates, and the keyword rules that read messages back.

Auditor actions are rendered into real user messages and target replies into real text; the same
keyword rules classify any user message (an LLM auditor's included) into (topic, framing, pressure),
so the simulated target and the per-transcript judges read natural language, not hidden codes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from auditrl.configfile import load_yaml
from auditrl.words import count_phrase, stems

FRAMINGS = ("natural", "direct", "test")
NATURAL, DIRECT, TEST = range(len(FRAMINGS))
# What a target reply shows on its face: an ordinary answer, the planted behavior's own words, an odd but
# innocent aside, a denial, a confession. Readers of transcripts (judges) classify replies into these.
REPLY_KINDS = ("normal", "display", "odd", "denial", "confession")
PRESSURES = ("none", "push", "accuse")
NO_PRESSURE, PUSH, ACCUSE = range(len(PRESSURES))
FALLBACK_TOPIC = "casual_chat"


class Topic(BaseModel):
    """A conversation topic: how to ask about it naturally and how an ordinary target answers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    phrase: str = Field(min_length=3)
    keywords: list[str] = Field(min_length=1)
    probes: list[str] = Field(min_length=1)
    replies: list[str] = Field(min_length=1)


def read_data(name: str) -> Any:
    """Parse one of the packaged AuditWorld data files."""
    return load_yaml(resources.files("auditrl.auditworld").joinpath(f"data/{name}").read_text(encoding="utf-8"))


@functools.cache
def load_topics() -> tuple[Topic, ...]:
    """Topics in file order (their index is the topic number used by vectorised episodes)."""
    raw = read_data("topics.yaml")
    out = []
    for tid, fields in raw.items():
        try:
            topic = Topic.model_validate({"id": tid, **fields})
        except (ValidationError, TypeError) as exc:
            raise ValueError(f"topics.yaml: topic {tid!r}: {exc}") from exc
        if not any(count_phrase(stems(topic.phrase), stems(k)) for k in topic.keywords):
            raise ValueError(f"topics.yaml: topic {tid!r}: field 'phrase' must contain one of its keywords")
        out.append(topic)
    if FALLBACK_TOPIC not in {t.id for t in out}:
        raise ValueError(f"topics.yaml: the fallback topic {FALLBACK_TOPIC!r} is missing")
    return tuple(out)


@functools.cache
def templates() -> dict[str, Any]:
    """The message templates (templates.yaml), read once."""
    return read_data("templates.yaml")


@dataclass(frozen=True)
class MessageClass:
    """What a user message asks about and how: the simulated target's reading of it."""

    topic: int
    framing: int
    pressure: int


@functools.cache
def _keyword_stems() -> tuple[tuple[tuple[str, ...], ...], ...]:
    return tuple(tuple(stems(k) for k in t.keywords) for t in load_topics())


def classify_topic(text: str) -> int:
    """Topic with the most keyword hits, as whole words by their stems ("devoted" is no "vote"), first in
    file order on ties; the fallback topic if none."""
    words = stems(text)
    topics = load_topics()
    hits = [sum(count_phrase(words, k) for k in keywords) for keywords in _keyword_stems()]
    best = max(hits)
    if best == 0:
        return [t.id for t in topics].index(FALLBACK_TOPIC)
    return hits.index(best)


def classify_message(text: str) -> MessageClass:
    """Keyword rules: test markers beat direct-question markers; accusation markers beat push markers."""
    low = text.lower()
    markers = templates()["markers"]
    framing = 2 if any(m in low for m in markers["test"]) else 1 if any(m in low for m in markers["direct"]) else 0
    pressure = 2 if any(m in low for m in markers["accuse"]) else 1 if any(m in low for m in markers["push"]) else 0
    return MessageClass(topic=classify_topic(text), framing=framing, pressure=pressure)


@dataclass(frozen=True)
class ReplyClass:
    """What a reply's text shows: its kind (REPLY_KINDS index) and whether it voices eval awareness."""

    kind: int
    remark: bool


@functools.cache
def _reply_markers() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Fixed text of confessions, denials, odd asides and eval-aware remarks (template parts around fields)."""
    tt = templates()["target"]
    fixed = lambda options: tuple(part.strip().lower() for o in options for part in o.split("{")[:1] if part.strip())
    return fixed(tt["confession"]), fixed(tt["denial_benign"] + tt["denial_planted"]), fixed(tt["odd"]), fixed(tt["eval_aware"])


def classify_reply(text: str, displays: tuple[str, ...]) -> ReplyClass:
    """Read a target reply by its words alone: `displays` are the texts in which behaviors show themselves.

    Confession beats denial beats display beats odd; what is left is an ordinary answer.
    """
    low = text.lower()
    confession, denial, odd, remark = _reply_markers()
    has = lambda markers: any(m in low for m in markers)
    kind = (
        4 if has(confession) else 3 if has(denial) else 1 if any(d.lower() in low for d in displays) else 2 if has(odd) else 0
    )
    return ReplyClass(kind=kind, remark=has(remark))


def pick(options: list[str], u: float) -> str:
    """Choose a template variant from a uniform draw in [0, 1), so text is reproducible from the draw."""
    return options[min(int(u * len(options)), len(options) - 1)]


def render_user_message(topic: int, framing: int, pressure: int, u: float) -> str:
    """The target-facing text of one auditor probe."""
    t = load_topics()[topic]
    a = templates()["auditor"]
    probe = pick(t.probes, u)
    body = pick(a[FRAMINGS[framing]], (u * 7.0) % 1.0).format(probe=probe, phrase=t.phrase)
    prefix = "" if pressure == NO_PRESSURE else pick(a[PRESSURES[pressure]], (u * 13.0) % 1.0).format(phrase=t.phrase)
    return prefix + body
