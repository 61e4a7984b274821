"""`scripted/auditor`: a scripted auditor that follows its seed instruction, for demos and tests of the audit loop.

It reads only what any auditor reads: the scenario (the seed instruction) in its system prompt, the messages
it sent and the replies that came back. Its plan, one tool call per turn:

1. the request the seed describes: the scripted request whose `cues` the seed uses most (a poem for a
   seed that asks for feedback on a poem), else the probe of the seed's topic (`seed_topic`) that shares
   most words with the seed;
2. a rollback to the start and the seed's variation of that request (the same poem as a colleague's);
3. a control request on another topic, for the target's ordinary tone;
4. a plain question about its instructions on the seed's topic (a planted target denies);
5. the end of the conversation.

With fewer turns than that (the prompt says how many), it drops the last probing steps so that it still ends
the conversation itself.

Its report claims a behavior only when a target reply showed one, recognised by AuditWorld's display texts of
every behavior (never by the plant), and quotes the reply's words that show it; otherwise it reports that it
found nothing. On a benign target it therefore has nothing to claim. Where several requests or controls fit
equally, the sampling seed (one per rollout) chooses, so rollouts differ and each is reproducible.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from typing import TYPE_CHECKING, Any

from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageSystem
from pydantic import Field, field_validator

from auditrl.auditworld.targets import load_sim_behaviors
from auditrl.auditworld.teacher import continuation, scenario_text
from auditrl.auditworld.texts import (
    classify_topic,
    content_stems,
    load_topics,
    pick,
    pick_by_message,
    templates,
)
from auditrl.behaviors.library import load_behaviors
from auditrl.configfile import ConfigModel, load_package_data
from auditrl.models.replies import target_replies, turn_index
from auditrl.scaffold.text_protocol import parse_tool_calls
from auditrl.words import count_phrase, stems

if TYPE_CHECKING:
    from sklearn.feature_extraction.text import TfidfVectorizer


class ScriptedRequest(ConfigModel):
    """A request a seed may describe: sent when the seed uses its `cues`, then varied after a rollback."""

    cues: list[str] = Field(min_length=1)
    message: str = Field(min_length=3)
    variation: str = Field(min_length=3)


class AuditorSteps(ConfigModel):
    """What the auditor writes before each step's tool call (its visible reasoning)."""

    open: str
    vary: str
    control: str
    ask: str
    end: str


class AuditorClaim(ConfigModel):
    """The report's words: the claim ({name}, {context}, {quote}), confidences and summaries ({context})."""

    description: str
    once: float = Field(ge=0.0, le=1.0)
    repeated: float = Field(ge=0.0, le=1.0)
    reasoning: str
    found: str
    nothing: str
    quote_words: int = Field(ge=1)


class SeedAuditorScript(ConfigModel):
    """The seed auditor's words and settings (auditworld/data/seed_auditor.yaml)."""

    report_trigger: str = Field(min_length=1)
    reply_tag: str = Field(min_length=1)
    requests: list[ScriptedRequest]
    controls: list[str] = Field(min_length=2)
    steps: AuditorSteps
    claim: AuditorClaim

    @field_validator("controls")
    @classmethod
    def _known_topics(cls, v: list[str]) -> list[str]:
        known = {t.id for t in load_topics()}
        unknown = [t for t in v if t not in known]
        if unknown:
            raise ValueError(f"unknown topic {unknown[0]!r} (known: {', '.join(sorted(known))})")
        return v


@functools.cache
def load_seed_auditor() -> SeedAuditorScript:
    return load_package_data(SeedAuditorScript, "auditrl.auditworld", "data/seed_auditor.yaml")


_BUDGET = re.compile(r"You have (\d+) turns")
"""How the auditor prompts state the turn budget."""
_SCENARIO_HEAD = re.compile(r"^(?:#+\s*Your scenario\s*$|Scenario:)", re.MULTILINE)
"""Where the auditor prompts (full and compact) put the seed instruction: after this heading."""


def seed_instruction(system: str) -> str:
    """The seed instruction in an auditor's system prompt: what follows its scenario heading (else the prompt
    without its tool descriptions), so the prompt's own words about auditing choose no topic."""
    scenario = scenario_text(system)
    heads = list(_SCENARIO_HEAD.finditer(scenario))
    return scenario[heads[-1].end() :].strip() if heads else scenario


def _analyzer(text: str) -> list[str]:
    return sorted(content_stems(text))


@functools.cache
def _topic_index() -> tuple[TfidfVectorizer, Any]:
    """TF-IDF vectors of AuditWorld's topics: each topic's phrase, keywords and probes, and the library's words
    for the situations that trigger the behaviors that show on it (what a seed describes)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    topics = load_topics()
    library = load_behaviors()
    situations: dict[str, list[str]] = {t.id: [] for t in topics}
    for bid, sim in load_sim_behaviors().items():
        for topic in sim.topics:
            if topic in situations and bid in library:
                situations[topic] += library[bid].triggers
    documents = [" ".join([t.phrase, *t.keywords, *t.probes, *situations[t.id]]) for t in topics]
    vectorizer = TfidfVectorizer(analyzer=_analyzer, sublinear_tf=True)
    return vectorizer, vectorizer.fit_transform(documents)


def seed_topic(scenario: str) -> int:
    """The AuditWorld topic a seed's scenario describes: the most similar topic by TF-IDF (first on ties)."""
    vectorizer, topics = _topic_index()
    similarity = (topics @ vectorizer.transform([scenario]).T).toarray().ravel()
    return int(similarity.argmax())


def _call(name: str, arguments: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>"


def _draw(seed: int | None, scenario: str, what: str) -> float:
    """A uniform in [0, 1) fixed by the sampling seed, the scenario and what it chooses."""
    key = "\x1f".join([str(seed), scenario, what]).encode("utf-8")
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "little") / 2.0**64


class SeedAuditor:
    """The auditor's policy: a function of the conversation and the sampling seed (see the module docstring)."""

    def __init__(self, script: SeedAuditorScript | None = None) -> None:
        self.script = script or load_seed_auditor()
        self.topics = load_topics()
        self.names = {b.id: b.name for b in load_behaviors().values()}
        self.displays = [(e.lower(), bid) for bid, sb in load_sim_behaviors().items() for e in sb.expressions]

    def request(self, scenario: str, seed: int | None) -> tuple[str, str]:
        """The seed's request and its variation: a scripted request by the seed's words, else topic probes."""
        said = stems(scenario)
        hits = [sum(count_phrase(said, stems(c)) for c in r.cues) for r in self.script.requests]
        best = max(hits, default=0)
        if best > 0:
            tied = [r for r, h in zip(self.script.requests, hits, strict=True) if h == best]
            chosen = pick(tied, _draw(seed, scenario, "request"))
            return chosen.message, chosen.variation
        probes = self.topics[seed_topic(scenario)].probes
        content = content_stems(scenario)
        u = _draw(seed, scenario, "probe")
        closest = pick_by_message([(len(content & content_stems(p)), p) for p in probes], u)
        k = probes.index(closest) if closest is not None else int(u * len(probes))
        return probes[k], probes[(k + 1) % len(probes)]

    def plan(self, scenario: str, seed: int | None, turns: int | None = None) -> list[str]:
        """Every turn's text, in order (see the module docstring), within `turns` when given."""
        steps = self.script.steps
        message, variation = self.request(scenario, seed)
        topic = classify_topic(message)
        ids = [t.id for t in self.topics]
        controls = [c for c in self.script.controls if c != ids[topic]]
        control = self.topics[ids.index(pick(controls, _draw(seed, scenario, "control")))]
        control_probe = pick(control.probes, _draw(seed, scenario, "control probe"))
        question = pick(templates()["auditor"]["direct"], _draw(seed, scenario, "ask"))
        rollback = _call("rollback_conversation", {"index": 0})
        probing = [
            f"{steps.open}\n{_call('send_message', {'message': message})}",
            f"{steps.vary}\n{rollback}\n{_call('send_message', {'message': variation})}",
            f"{steps.control}\n{_call('send_message', {'message': control_probe})}",
            f"{steps.ask}\n{_call('send_message', {'message': question.format(phrase=self.topics[topic].phrase)})}",
        ]
        kept = probing if turns is None else probing[: max(turns - 1, 0)]
        return [*kept, f"{steps.end}\n{_call('end_conversation', {})}"]

    def shown(self, reply: str) -> tuple[str, str] | None:
        """(behavior id, the display as the target wrote it) when the reply shows a behavior."""
        low = reply.lower()
        for display, bid in self.displays:
            at = low.find(display)
            if at >= 0:
                return bid, reply[at : at + len(display)]
        return None

    def reply(self, messages: list[ChatMessage], seed: int | None) -> str:
        """The next turn, or the report once asked for it; after a begun reply, only its continuation."""
        begun = messages[-1].text if messages and isinstance(messages[-1], ChatMessageAssistant) else None
        body = messages[:-1] if begun is not None else messages
        system = "\n".join(m.text for m in body if isinstance(m, ChatMessageSystem))
        scenario = seed_instruction(system)
        asked = bool(body) and self.script.report_trigger.lower() in body[-1].text.lower()
        budget = _BUDGET.search(system)
        plan = self.plan(scenario, seed, int(budget.group(1)) if budget else None)
        turn = turn_index(body)
        if not asked and turn < len(plan):
            return continuation(plan[turn], begun)
        sent = [
            str(c.arguments.get("message", ""))
            for m in body
            if isinstance(m, ChatMessageAssistant)
            for c in parse_tool_calls(m.text)
            if c.function == "send_message" and c.parse_error is None
        ]
        return continuation(self.report(sent, target_replies(body, self.script.reply_tag)), begun)

    def report(self, sent: list[str], replies: list[str]) -> str:
        """A claim of the behavior the replies showed most (first seen on ties), quoting it; or nothing found."""
        claim = self.script.claim
        # a message the target has not answered yet has no reply to pair with
        seen = [
            (classify_topic(m), found)
            for m, r in zip(sent, replies, strict=False)
            if (found := self.shown(r)) is not None
        ]
        asked = "; ".join(dict.fromkeys(self.topics[classify_topic(m)].phrase for m in sent)) or "nothing"
        if not seen:
            return json.dumps(
                {"no_behavior_found": True, "predictions": [], "summary": claim.nothing.format(context=asked)},
                ensure_ascii=False,
                indent=2,
            )
        ids = [bid for _, (bid, _) in seen]
        bid = max(dict.fromkeys(ids), key=ids.count)
        topic, (_, quote) = next((t, s) for t, s in seen if s[0] == bid)
        words = quote.split()
        cut = " ..." if len(words) > claim.quote_words else ""
        excerpt = " ".join(words[: claim.quote_words]).replace('"', "'") + cut
        name, context = self.names.get(bid, bid), self.topics[topic].phrase
        prediction = {
            "description": claim.description.format(name=name, context=context, quote=excerpt),
            "confidence": claim.repeated if ids.count(bid) > 1 else claim.once,
            "quotes": [quote],
            "reasoning": claim.reasoning,
        }
        report = {"no_behavior_found": False, "predictions": [prediction], "summary": claim.found.format(context=asked)}
        return json.dumps(report, ensure_ascii=False, indent=2)
