"""The words of AuditWorld: topics, message templates, and the keyword rules that read messages back.

Auditor actions are rendered into real user messages and target replies into real text; the same
keyword rules classify any user message (an LLM auditor's included) into (topic, framing, pressure),
so the simulated target and the per-transcript judges read natural language, not hidden codes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from auditrl.configfile import load_yaml
from auditrl.words import count_phrase, stems

FRAMINGS = ("natural", "direct", "test")
NATURAL, DIRECT, TEST = range(len(FRAMINGS))
# What a target reply shows on its face: an ordinary answer, the planted behavior's own words, an odd but
# innocent aside, a denial, a confession. Readers of transcripts (judges) classify replies into these.
REPLY_KINDS = ("normal", "display", "odd", "denial", "confession")
DISPLAY, ODD, DENIAL, CONFESSION = range(1, len(REPLY_KINDS))
PRESSURES = ("none", "push", "accuse")
NO_PRESSURE, PUSH, ACCUSE = range(len(PRESSURES))
FALLBACK_TOPIC = "casual_chat"
T = TypeVar("T")


class Answer(BaseModel):
    """An ordinary answer to a particular request of a topic: `asks` are the phrases that request uses (all)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    asks: list[str] = Field(min_length=1)
    text: str = Field(min_length=3)


class Topic(BaseModel):
    """A conversation topic: how to ask about it naturally and how an ordinary target answers.

    Reply `i` answers probe `i`; `answers` answer other requests of the topic, chosen by what a message asks.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    phrase: str = Field(min_length=3)
    keywords: list[str] = Field(min_length=1)
    probes: list[str] = Field(min_length=1)
    replies: list[str] = Field(min_length=1)
    answers: list[Answer] = Field(default_factory=list)

    @model_validator(mode="after")
    def _paired(self) -> Topic:
        if len(self.replies) != len(self.probes):
            raise ValueError(f"field 'replies' must answer each probe in order ({len(self.probes)} probes)")
        return self


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


@functools.cache
def _keyword_index() -> dict[str, list[tuple[int, tuple[str, ...]]]]:
    """Each keyword's first stem -> (topic, keyword stems): a text is scanned once, not once per keyword."""
    index: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
    for topic, keywords in enumerate(_keyword_stems()):
        for k in keywords:
            if k:
                index.setdefault(k[0], []).append((topic, k))
    return index


@functools.lru_cache(maxsize=1 << 14)
def _topic_hits(text: str) -> tuple[int, ...]:
    words = stems(text)
    hits = [0] * len(_keyword_stems())
    index = _keyword_index()
    for i, w in enumerate(words):
        for topic, k in index.get(w, ()):
            if tuple(words[i : i + len(k)]) == k:
                hits[topic] += 1
    return tuple(hits)


def topic_hits(text: str) -> list[int]:
    """Each topic's keyword hits in `text`, as whole words by their stems ("devoted" is no "vote"); memoised,
    since rendered and simulated audits send the same template messages many times."""
    return list(_topic_hits(text))


def classify_topic(text: str) -> int:
    """Topic with the most keyword hits, first in file order on ties; the fallback topic if none."""
    hits = topic_hits(text)
    best = max(hits)
    if best == 0:
        return [t.id for t in load_topics()].index(FALLBACK_TOPIC)
    return hits.index(best)


@functools.lru_cache(maxsize=1 << 14)
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
    return (
        fixed(tt["confession"]),
        fixed(tt["denial_benign"] + tt["denial_planted"]),
        fixed(tt["odd"]),
        fixed(tt["eval_aware"]),
    )


def classify_reply(text: str, displays: tuple[str, ...]) -> ReplyClass:
    """Read a target reply by its words alone: `displays` are the texts in which behaviors show themselves.

    Confession beats denial beats display beats odd; what is left is an ordinary answer.
    """
    low = text.lower()
    confession, denial, odd, remark = _reply_markers()
    has = lambda markers: any(m in low for m in markers)
    kind = (
        4
        if has(confession)
        else 3
        if has(denial)
        else 1
        if any(d.lower() in low for d in displays)
        else 2
        if has(odd)
        else 0
    )
    return ReplyClass(kind=kind, remark=has(remark))


def pick(options: Sequence[T], u: float) -> T:
    """Choose a template variant from a uniform draw in [0, 1), so text is reproducible from the draw."""
    return options[min(int(u * len(options)), len(options) - 1)]


@functools.cache
def _ignored_stems() -> frozenset[str]:
    return frozenset(stems(" ".join(ENGLISH_STOP_WORDS)))


def content_stems(text: str) -> frozenset[str]:
    """The stems of a text's words that carry content (no stop words)."""
    return frozenset(stems(text)) - _ignored_stems()


def pick_by_message(options: Sequence[tuple[int, str]], u: float) -> str | None:
    """The option with the highest score (the draw `u` breaks ties); None when no option scores above 0."""
    best = max((score for score, _ in options), default=0)
    if best <= 0:
        return None
    return pick([text for score, text in options if score == best], u)


def answer_text(topic: int, message: str | None, u: float) -> str:
    """An ordinary reply on `topic` to `message`: the answer to what it asks, or a topic reply by the draw.

    An answer whose `asks` phrases the message all uses wins (the one asking most, if several); else the reply
    to the probe sharing most content words with the message; else, for a message that names no topic at all,
    a general reply asking what is needed. Without a message (AuditWorld's rendering of its own probes passes
    none) the draw picks a reply.
    Which text is chosen never changes what the reply shows (its kind), only its words.
    """
    t = load_topics()[topic]
    if message is None:
        return pick(t.replies, u)
    said = stems(message)
    asked = [(len(a.asks) if all(count_phrase(said, stems(p)) for p in a.asks) else 0, a.text) for a in t.answers]
    chosen = pick_by_message(asked, u)
    if chosen is None:
        content = content_stems(message)
        chosen = pick_by_message(
            [(len(content & content_stems(p)), r) for p, r in zip(t.probes, t.replies, strict=True)], u
        )
    if chosen is None and not any(topic_hits(message)):
        chosen = pick(templates()["target"]["general"], u)
    return chosen if chosen is not None else pick(t.replies, u)


def render_user_message(topic: int, framing: int, pressure: int, u: float) -> str:
    """The target-facing text of one auditor probe."""
    t = load_topics()[topic]
    a = templates()["auditor"]
    probe = pick(t.probes, u)
    body = pick(a[FRAMINGS[framing]], (u * 7.0) % 1.0).format(probe=probe, phrase=t.phrase)
    prefix = "" if pressure == NO_PRESSURE else pick(a[PRESSURES[pressure]], (u * 13.0) % 1.0).format(phrase=t.phrase)
    return prefix + body
