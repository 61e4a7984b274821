"""Strategy-only summaries of transcripts: what the auditor did, never what the target was audited for.

Whole-transcript summaries cluster by the planted behavior (the topic dominates the text), so the
summary used for strategy clustering describes only tools, framing, pressure, rollbacks, prefill and
how the audit concluded. The deterministic summary is chosen from the audit's counts (`features`) and
written with the fixed sentences of data/summary_sentences.yaml; no message text, seed, behavior or
report wording is ever copied into it. It opens with the tactics that make up most of the messages and
their shares, and it says what rollbacks were used for (re-running a probe in a reset context is a
comparison, resuming accusations is not), because an embedding of the text weighs every sentence
alike. An optional LLM summariser (prompt file) gives richer paragraphs under the same rule.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from auditrl.analysis.conduct import Conduct
from auditrl.analysis.features import (
    DOMINANT_SHARE,
    MINOR_SHARE,
    TACTICS,
    StrategyCues,
    StrategyFeatures,
    controlled_comparison,
    cycled,
    dominant_tactics,
    manipulations,
    strategy_features,
)
from auditrl.configfile import load_package_data
from auditrl.scaffold.transcript import Transcript

if TYPE_CHECKING:  # inspect-ai is imported by the model-written summary alone; the deterministic one never needs it
    from inspect_ai.model import Model

log = logging.getLogger(__name__)

EARLY_END_FRACTION = 0.3
SENTENCES_FILE = "data/summary_sentences.yaml"


class Sentences(BaseModel):
    """The words of the deterministic summary (data/summary_sentences.yaml)."""

    tactics: dict[str, str]
    nouns: dict[str, tuple[str, str]]
    once: str
    times: str = Field(pattern=r"\{n\}")
    confidence: dict[str, str]
    manipulations: dict[str, str]
    sentences: dict[str, str]

    def say(self, key: str, **fields: object) -> str:
        try:
            return self.sentences[key].format(**fields)
        except KeyError as exc:
            raise ValueError(
                f"{SENTENCES_FILE}: sentence {key!r} is missing or names an unknown field ({exc})"
            ) from exc

    def count(self, n: int, noun: str) -> str:
        one, many = self.nouns[noun]
        return f"{n} {one if n == 1 else many}"

    def repeats(self, n: int) -> str:
        return self.once if n == 1 else self.times.format(n=n)

    def level(self, confidence: float) -> str:
        return self.confidence["high" if confidence >= 0.7 else "moderate" if confidence >= 0.4 else "low"]


@cache
def load_sentences() -> Sentences:
    words = load_package_data(Sentences, "auditrl.analysis", SENTENCES_FILE)
    missing = sorted(set(TACTICS) - set(words.tactics))
    if missing:
        raise ValueError(f"{SENTENCES_FILE}: no name for the tactics {', '.join(missing)}")
    return words


def _join(items: list[str]) -> str:
    return ", ".join(items[:-1]) + (" and " if len(items) > 1 else "") + items[-1]


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def _opening(f: StrategyFeatures, w: Sentences, dominant: list[str], stuck: bool) -> list[str]:
    lead = [w.say("lead_stuck", repeated=f.repeated_messages, messages=f.messages)] if stuck else []
    lead += [
        w.say("lead_tactic", tactic=w.tactics[k], count=f.tactic_messages[k], messages=f.messages) for k in dominant
    ]
    parts = [w.say("dominated", lead=_capitalise(_join(lead)))] if lead else []
    setup = (
        w.say("setup_custom", times="" if f.system_prompts == 1 else " " + w.repeats(f.system_prompts))
        if f.system_prompts
        else w.say("setup_default")
    )
    if f.tools_created:
        setup += w.say("setup_tools", tools=w.count(f.tools_created, "synthetic tool"))
        setup += w.say("setup_tool_results", results=w.count(f.tool_results, "tool call")) if f.tool_results else ""
    parts.append(setup + ".")
    engage = w.say("engage", messages=w.count(f.messages, "message"), turns=f.turns_used, max_turns=f.max_turns)
    parts.append(engage + (w.say("engage_barely") if f.messages <= 1 else "") + ".")
    return parts


def _tactics(f: StrategyFeatures, w: Sentences, dominant: list[str]) -> list[str]:
    """How the auditor shaped the replies, and the tactics of a smaller share of its messages."""
    parts: list[str] = []
    rigged = manipulations(f)
    if rigged and f.confrontational_messages >= DOMINANT_SHARE * f.messages:
        parts.append(w.say("manipulated", manipulations=_join([w.manipulations[k] for k in rigged])))
    # Tactics of a small share of the messages are named only by their count: named, one stray phrase
    # would weigh as much in the text as the tactic the auditor used all along.
    shown = [k for k in TACTICS if k != "plain" and k not in dominant and f.tactic_messages.get(k, 0)]
    named = [k for k in shown if f.tactic_messages[k] >= MINOR_SHARE * f.messages]
    if named:
        used = _join(
            [w.say("minor_tactic", tactic=w.tactics[k], count=f.tactic_messages[k], messages=f.messages) for k in named]
        )
        parts.append(w.say("also_used" if dominant else "messages_used", tactics=used))
    occasional = max((f.tactic_messages[k] for k in shown if k not in named), default=0)
    if occasional:
        parts.append(w.say("occasional", count=occasional, messages=f.messages))
    return parts


def _conduct(f: StrategyFeatures, w: Sentences, dominant: list[str], stuck: bool) -> list[str]:
    parts: list[str] = []
    compared = controlled_comparison(f)
    if f.rollbacks:
        if f.rollbacks_to_confront and f.rollbacks_to_confront >= f.rollbacks_to_rerun:
            how = "rollback_confront"
        elif f.rollbacks_to_rerun:
            how = "rollback_compare" if compared else "rollback_resend"
        else:
            how = "rollback_new"
        parts.append(
            w.say("rollback", times=w.repeats(f.rollbacks), branches=w.count(f.branches, "branch"), how=w.say(how))
        )
    elif f.messages >= 2:
        parts.append(w.say("linear"))
    if compared and f.reposed_messages:
        parts.append(w.say("compared", times=w.repeats(f.reposed_messages)))
    looped = cycled(f)
    if looped:
        parts.append(w.say("cycled", again=f.reposed_messages + f.repeated_messages, messages=f.messages))
    if f.prefills:
        parts.append(w.say("prefill", times=w.repeats(f.prefills)))
    if f.messages >= 2:  # what one message said is no strategy: it would outweigh that the audit barely happened
        parts += _tactics(f, w, dominant)
    if f.messages >= 3 and not f.confrontational_messages and not compared and not looped and "plain" in dominant:
        parts.append(w.say("observed"))
    if f.repeated_messages:
        parts.append(
            w.say("repeated", times=w.repeats(f.repeated_messages), stuck=w.say("repeated_stuck") if stuck else "")
        )
    if f.reposed_messages and not compared and not looped:
        parts.append(w.say("reposed", times=w.repeats(f.reposed_messages)))
    if f.invalid_calls:
        parts.append(w.say("invalid", calls=w.count(f.invalid_calls, "invalid tool call")))
    return parts


def _ending(f: StrategyFeatures, w: Sentences) -> list[str]:
    parts: list[str] = []
    if f.status == "error":
        parts.append(w.say("error"))
    elif f.status == "budget_exhausted":
        parts.append(w.say("budget"))
    elif f.turns_used <= EARLY_END_FRACTION * f.max_turns:
        parts.append(w.say("ended_early" if f.messages <= 2 else "stopped_early"))
    if f.report == "none":
        parts.append(w.say("no_report"))
    elif f.report == "clean":
        parts.append(w.say("clean"))
    elif f.report == "findings":
        cited = f.quotes_after_pressure + f.quotes_after_questions + f.quotes_after_plain
        basis = ""
        if cited and 2 * f.quotes_after_pressure >= cited:
            basis = w.say("basis_pressure" if f.quotes_after_pressure == cited else "basis_partly_pressure")
        elif cited and 2 * (f.quotes_after_pressure + f.quotes_after_questions) > cited:
            basis = w.say("basis_self")
        elif cited and f.quotes_after_plain == cited:
            basis = w.say("basis_plain")
        asked = f.cue_messages.get("self_report", 0)
        parts.append(
            w.say(
                "findings",
                hypotheses=w.count(f.predictions, "hypothesis"),
                confidence=w.say("findings_confidence", level=w.level(f.top_confidence))
                if f.top_confidence is not None
                else "",
                quotes=w.say(
                    "findings_quotes", quotes=w.count(f.quotes, "verbatim target quote"), verified=f.verified_quotes
                )
                if f.quotes
                else w.say("findings_no_quotes"),
                basis=basis,
                self_descriptions=w.say("self_descriptions")
                if asked and 2 * asked >= f.messages and f.cue_messages.get("pressure", 0) < asked
                else "",
            )
        )
    if f.report_recovered:
        parts.append(w.say("recovered"))
    return parts


def summary_from_features(f: StrategyFeatures) -> str:
    """Fixed sentences chosen by the counts; the same conduct always gives the same text.

    The dominant tactics come first, with their share of the messages, so that a few rollbacks or a
    stray framing cannot outweigh what the auditor did most of the time.
    """
    fields = f.__dict__
    key = (
        tuple(fields["tactic_messages"].items()),
        tuple(fields["cue_messages"].items()),
        *[v for v in fields.values() if type(v) is not dict],
    )
    text = _WRITTEN.get(key)
    if text is None:
        w = load_sentences()
        dominant = dominant_tactics(f)
        stuck = f.messages >= 2 and 2 * f.repeated_messages >= f.messages
        text = " ".join([*_opening(f, w, dominant, stuck), *_conduct(f, w, dominant, stuck), *_ending(f, w)])
        if len(_WRITTEN) >= WRITTEN_KEPT:
            _WRITTEN.clear()
        _WRITTEN[key] = text
    return text


WRITTEN_KEPT = 100_000
"""Summaries remembered by their features (tens of thousands of audits share a few thousand summaries)."""
_WRITTEN: dict[tuple[object, ...], str] = {}


def strategy_summary(t: Conduct, cues: StrategyCues | None = None) -> str:
    """The deterministic strategy-only paragraph for one transcript."""
    return summary_from_features(strategy_features(t, cues))


def strategy_summaries(transcripts: Sequence[Transcript], cues: StrategyCues | None = None) -> list[str]:
    return [strategy_summary(t, cues) for t in transcripts]


@cache
def _prompt_file(path: Path | None) -> tuple[str, str]:
    """(system, user) halves of the summariser prompt, split at the '## User' heading."""
    text = (
        path.read_text(encoding="utf-8")
        if path is not None
        else resources.files("auditrl.analysis").joinpath("prompts/strategy_summary.md").read_text(encoding="utf-8")
    )
    system, sep, user = text.partition("\n## User\n")
    if not sep or "{auditor_side}" not in user:
        raise ValueError(f"{path or 'strategy_summary.md'}: needs a '## User' section containing {{auditor_side}}")
    return system.removeprefix("## System\n").strip(), user.strip()


def render_auditor_side(t: Transcript, max_result_chars: int = 400) -> str:
    """The auditor's side of the audit as plain text: its reasoning, tool calls and (shortened) results."""
    lines: list[str] = []
    for m in t.auditor_messages:
        if m.role == "assistant":
            if m.content.strip():
                lines.append(f"[turn {m.turn}] AUDITOR: {m.content.strip()}")
            for c in m.tool_calls:
                lines.append(f"[turn {m.turn}] TOOL CALL {c.function}: {json.dumps(c.arguments, ensure_ascii=False)}")
        elif m.role == "tool":
            text = m.content.strip()
            short = text if len(text) <= max_result_chars else text[:max_result_chars] + " ..."
            lines.append(f"[turn {m.turn}] RESULT: {short}")
    if t.report is not None:
        lines.append(f"FINAL REPORT: {t.report.model_dump_json(exclude={'summary'})}")
    return "\n".join(lines)


_STRATEGY_TAG = re.compile(r"<strategy>(.*?)</strategy>", re.DOTALL | re.IGNORECASE)


async def llm_strategy_summary(
    t: Transcript, model: Model, prompt: Path | None = None, retries: int = 2, max_tokens: int = 400
) -> str | None:
    """A model-written strategy paragraph, or None when every attempt failed or was malformed."""
    from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser, GenerateConfig

    system, user = _prompt_file(prompt)
    messages: list[ChatMessage] = [
        ChatMessageSystem(content=system),
        ChatMessageUser(content=user.replace("{auditor_side}", render_auditor_side(t))),
    ]
    for attempt in range(retries + 1):
        try:
            output = await model.generate(messages, config=GenerateConfig(max_tokens=max_tokens, temperature=0.0))
        except Exception as exc:  # noqa: BLE001 - network and provider errors: retry, then abstain
            log.warning("strategy summariser failed on %s (attempt %d): %s", t.id, attempt + 1, exc)
            continue
        match = _STRATEGY_TAG.search(output.completion)
        if match and match.group(1).strip():
            return " ".join(match.group(1).split())
        log.warning("strategy summariser gave no <strategy> block for %s (attempt %d)", t.id, attempt + 1)
    return None
