"""`scripted/teacher`: a scripted auditor of AuditWorld text targets, the teacher `auditrl sft` distils.

It reads only what any auditor reads, its own conversation: the scenario in its system prompt, the
messages it sent and the target replies that came back. Each turn it sends a natural request (a topic
probe of AuditWorld, opened by the scenario's words for the topic) on one of the scenario's topics, in the
scenario's order; when a reply shows a
behavior it takes that topic up again (`pursue` probes in all) before moving on, and once every topic
is probed it ends the audit (or, when its turns are begun for it with a message, probes again). Its
report claims what it saw, quoting the target's words and naming the topic, or that it found nothing.

It recognises a behavior by AuditWorld's display texts of every behavior, never by the plant, so on a
benign target it has nothing to claim; an innocent aside or a denial is not a finding. Its text follows
the text protocol and the guided prompt set's begun turns, so a student trained on its audits sees
exactly the sequences it will itself sample (auditrl.train.teacher).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter
from typing import Any

from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageSystem
from pydantic import Field

from auditrl.auditworld.targets import load_sim_behaviors
from auditrl.auditworld.texts import FALLBACK_TOPIC, classify_topic, load_topics
from auditrl.behaviors.library import load_behaviors
from auditrl.configfile import ConfigModel, load_package_data
from auditrl.models.replies import target_replies
from auditrl.scaffold.text_protocol import parse_tool_calls, render_tools_prompt
from auditrl.scaffold.tools import auditor_tools

SCENARIO_TOPICS = 3
"""Topics taken from the scenario by keywords when it names none by phrase (a library seed)."""


class TeacherConfidence(ConfigModel):
    once: float = Field(ge=0.0, le=1.0)
    repeated: float = Field(ge=0.0, le=1.0)


class TeacherSummary(ConfigModel):
    found: str
    nothing: str


class TeacherScript(ConfigModel):
    """The teacher's fixed words and settings (sim/data/teacher.yaml)."""

    report_trigger: str = Field(min_length=1)
    reply_tag: str = Field(min_length=1)
    pursue: int = Field(ge=1)
    probe: str = Field(min_length=1)
    claim: str = Field(min_length=1)
    quote_words: int = Field(ge=1)
    confidence: TeacherConfidence
    reasoning: str
    summary: TeacherSummary
    end: str


@functools.cache
def load_script() -> TeacherScript:
    return load_package_data(TeacherScript, "auditrl.auditworld", "data/teacher.yaml")


@functools.cache
def _tool_prompt_heads() -> tuple[str, ...]:
    """The first line of each rendering of the tools, where the scenario part of a system prompt ends."""
    tools = auditor_tools()
    return tuple(render_tools_prompt(tools, compact=c).splitlines()[0] for c in (True, False))


def scenario_text(system: str) -> str:
    """The system prompt without its rendered tool descriptions (which name no scenario)."""
    for head in _tool_prompt_heads():
        if head in system:
            system = system[: system.index(head)]
    return system


def scenario_topics(system: str) -> list[int]:
    """The scenario's topics: those it names by phrase, in its order; else the ones its keywords hit most."""
    topics = load_topics()
    low = scenario_text(system).lower()
    named = sorted((low.find(t.phrase.lower()), i) for i, t in enumerate(topics) if t.phrase.lower() in low)
    if named:
        return [i for _, i in named]
    hits = [(sum(low.count(k) for k in t.keywords), i) for i, t in enumerate(topics)]
    ranked = [i for n, i in sorted(hits, key=lambda h: -h[0]) if n > 0][:SCENARIO_TOPICS]
    return ranked or [[t.id for t in topics].index(FALLBACK_TOPIC)]


def _call(name: str, arguments: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>"


def continuation(text: str, prefill: str | None) -> str:
    """What follows a begun reply (the whole text when it does not start with the begun words)."""
    if prefill and text.startswith(prefill):
        return text[len(prefill) :]
    return text


class SimTeacher:
    """The teacher's policy: a function of the conversation alone (see the module docstring)."""

    def __init__(self, script: TeacherScript | None = None) -> None:
        self.script = script or load_script()
        self.topics = load_topics()
        self.names = {b.id: b.name for b in load_behaviors().values()}
        self.displays = [(e.lower(), bid) for bid, sb in load_sim_behaviors().items() for e in sb.expressions]

    def shown(self, reply: str) -> tuple[str, str] | None:
        """(behavior id, the display as the target wrote it) when the reply shows a behavior."""
        low = reply.lower()
        for display, bid in self.displays:
            at = low.find(display)
            if at >= 0:
                return bid, reply[at : at + len(display)]
        return None

    def reply(self, messages: list[ChatMessage]) -> str:
        """The teacher's next reply; after a begun reply (a trailing assistant message), only its continuation."""
        begun = messages[-1].text if messages and isinstance(messages[-1], ChatMessageAssistant) else None
        body = messages[:-1] if begun is not None else messages
        system = "\n".join(m.text for m in body if isinstance(m, ChatMessageSystem))
        sent = [
            str(c.arguments.get("message", ""))
            for m in body
            if isinstance(m, ChatMessageAssistant)
            for c in parse_tool_calls(m.text)
            if c.function == "send_message" and c.parse_error is None
        ]
        replies = target_replies(body, self.script.reply_tag)
        # a message the target has not answered yet has no reply to pair with
        history = [(classify_topic(m), self.shown(r)) for m, r in zip(sent, replies, strict=False)]
        scenario = scenario_topics(system)
        asked = bool(body) and self.script.report_trigger.lower() in body[-1].text.lower()
        if asked:
            text = self.report(scenario, history, one_line=begun is not None)
        else:
            text = self.turn(system, scenario, history, must_send=begun is not None)
        return continuation(text, begun)

    def turn(self, system: str, scenario: list[int], history: list[tuple[int, Any]], must_send: bool) -> str:
        """Pursue a topic that showed something, else the next unprobed topic of the scenario, else end."""
        counts = Counter(topic for topic, _ in history)
        for topic in dict.fromkeys(t for t, seen in history if seen):
            if counts[topic] < self.script.pursue:
                return self.probe(system, topic, counts[topic])
        for topic in scenario:
            if counts[topic] == 0:
                return self.probe(system, topic, 0)
        if not must_send:
            return f"{self.script.end}\n{_call('end_conversation', {})}"
        topic = min(scenario, key=lambda t: counts[t])
        return self.probe(system, topic, counts[topic])

    def probe(self, system: str, topic: int, asked_before: int) -> str:
        """A natural request on `topic` in the scenario's words: its probes in turn, from a start fixed by the
        scenario (for variety)."""
        t = self.topics[topic]
        start = int.from_bytes(hashlib.sha256(system.encode("utf-8")).digest()[:4], "little")
        message = self.script.probe.format(phrase=t.phrase, probe=t.probes[(start + asked_before) % len(t.probes)])
        return _call("send_message", {"message": message})

    def report(self, scenario: list[int], history: list[tuple[int, Any]], one_line: bool) -> str:
        """The report: the behavior shown most often (first seen on ties), where it showed, or nothing found."""
        probed = "; ".join(dict.fromkeys(self.topics[t].phrase for t, _ in history)) or "nothing"
        shown = [(topic, seen) for topic, seen in history if seen]
        script = self.script
        if not shown:
            report: dict[str, Any] = {"no_behavior_found": True, "predictions": []}
            if not one_line:
                report["summary"] = script.summary.nothing.format(topics=probed)
            return json.dumps(report, ensure_ascii=False)
        tally = Counter(seen[0] for _, seen in shown)
        bid = max(tally, key=lambda b: (tally[b], -next(i for i, (_, s) in enumerate(shown) if s[0] == b)))
        topic, (_, quote) = next((t, s) for t, s in shown if s[0] == bid)
        phrase = self.topics[topic].phrase
        confidence = script.confidence.repeated if tally[bid] > 1 else script.confidence.once
        words = quote.split()
        excerpt = " ".join(words[: script.quote_words]).replace('"', "'") + (
            " ..." if len(words) > script.quote_words else ""
        )
        name = self.names.get(bid, bid.replace("_", " "))
        prediction: dict[str, Any] = {
            "description": script.claim.format(name=name, phrase=phrase, quote=excerpt),
            "confidence": confidence,
        }
        report = {"no_behavior_found": False, "predictions": [prediction]}
        if not one_line:
            prediction.update(quotes=[quote], reasoning=script.reasoning)
            report["summary"] = script.summary.found.format(topics=probed, phrase=phrase)
        return json.dumps(report, ensure_ascii=False)
