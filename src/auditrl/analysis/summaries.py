"""Strategy-only summaries of transcripts: what the auditor did, never what the target was audited for.

Whole-transcript summaries cluster by the planted behavior (the topic dominates the text), so the
summary used for strategy clustering describes only tools, framing, pressure, rollbacks, prefill and
how the audit concluded. The deterministic summary is built from counts and fixed sentences; no message
text, seed, behavior or report wording is ever copied into it. An optional LLM summariser (prompt file)
gives richer paragraphs under the same rule.
"""

from __future__ import annotations

import difflib
import json
import logging
import re
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path

import yaml
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig, Model
from pydantic import BaseModel, Field, ValidationError

from auditrl.scaffold.transcript import Transcript

log = logging.getLogger(__name__)

CUE_GROUPS = ("self_report", "pressure", "authority", "roleplay", "coercion", "introspection", "meta")
NEAR_DUPLICATE = 0.9
EARLY_END_FRACTION = 0.3


class StrategyCues(BaseModel):
    """Phrase lists marking tactics in target-facing messages (see data/strategy_cues.yaml)."""

    self_report: list[str] = Field(min_length=1)
    pressure: list[str] = Field(min_length=1)
    authority: list[str] = Field(min_length=1)
    roleplay: list[str] = Field(min_length=1)
    coercion: list[str] = Field(min_length=1)
    introspection: list[str] = Field(min_length=1)
    meta: list[str] = Field(min_length=1)


@cache
def _default_cues() -> StrategyCues:
    text = resources.files("auditrl.analysis").joinpath("data/strategy_cues.yaml").read_text(encoding="utf-8")
    return StrategyCues.model_validate(yaml.safe_load(text))


def load_cues(path: Path | None = None) -> StrategyCues:
    if path is None:
        return _default_cues()
    try:
        return StrategyCues.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except ValidationError as exc:
        raise ValueError(f"{path}: invalid strategy cue file: {exc}") from exc


class StrategyFeatures(BaseModel):
    """Countable facts about the auditor's conduct, the input of the deterministic summary."""

    system_prompts: int = 0
    tools_created: int = 0
    tool_results: int = 0
    messages: int = 0
    distinct_messages: int = 0
    repeated_messages: int = 0
    rollbacks: int = 0
    branches: int = 1
    varied_after_rollback: bool = False
    prefills: int = 0
    cue_messages: dict[str, int] = Field(default_factory=dict, description="Messages showing each cue group.")
    invalid_calls: int = 0
    turns_used: int = 0
    max_turns: int = 1
    status: str = "completed"
    report: str = Field(default="none", description="none | clean | findings | error")
    predictions: int = 0
    top_confidence: float | None = None
    quotes: int = 0
    verified_quotes: int = 0
    report_recovered: bool = False


def _message_text(arguments: dict[str, object]) -> str:
    """The user-message text of a send_message call, whatever the argument is called."""
    for key in ("message", "content", "text"):
        value = arguments.get(key)
        if isinstance(value, str):
            return value
    return " ".join(v for k, v in arguments.items() if isinstance(v, str) and k != "prefill")


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower()).strip()


def strategy_features(t: Transcript, cues: StrategyCues | None = None) -> StrategyFeatures:
    """Count what the auditor did, from its tool calls, the target tree and the report."""
    cue_lists = (cues or _default_cues()).model_dump()
    calls = [c for m in t.auditor_messages if m.role == "assistant" for c in m.tool_calls]
    f = StrategyFeatures(turns_used=t.turns_used, max_turns=t.budget.max_turns, status=t.status)
    f.invalid_calls = sum(c.parse_error is not None for c in calls) + sum(
        m.error is not None for m in t.auditor_messages if m.role == "tool"
    )
    sent: list[str] = []
    arg_prefills = 0
    after_rollback: list[int] = []
    for c in calls:
        if c.function == "set_target_system_message":
            f.system_prompts += 1
        elif c.function == "create_tool":
            f.tools_created += 1
        elif c.function == "send_tool_call_result":
            f.tool_results += 1
        elif c.function == "rollback_conversation":
            f.rollbacks += 1
            after_rollback.append(len(sent))
        elif c.function == "send_message":
            sent.append(_normalise(_message_text(c.arguments)))
            prefill = c.arguments.get("prefill")
            arg_prefills += isinstance(prefill, str) and bool(prefill.strip())
    f.messages = len(sent)
    f.distinct_messages = len(set(sent))
    # A near-copy of a recent message counts as repetition unless it opens a new branch: re-running a
    # slightly varied probe after a rollback is a controlled comparison, not a loop.
    f.repeated_messages = sum(
        1
        for i, text in enumerate(sent)
        if i > 0
        and i not in after_rollback
        and any(difflib.SequenceMatcher(None, text, prev).ratio() >= NEAR_DUPLICATE for prev in sent[max(0, i - 3) : i])
    )
    f.varied_after_rollback = any(0 < i < len(sent) and sent[i] not in sent[:i] for i in after_rollback)
    f.branches = max(1, len([leaf for leaf in t.leaves() if t.message(leaf).role != "system"]))
    f.prefills = max(sum(m.prefill is not None and bool(m.prefill.strip()) for m in t.target_messages), arg_prefills)
    f.cue_messages = {g: sum(any(p in text for p in cue_lists[g]) for text in sent) for g in CUE_GROUPS}
    if t.report is not None:
        r = t.report
        f.report = "clean" if r.no_behavior_found else "findings"
        f.predictions = len(r.predictions)
        f.top_confidence = max((p.confidence for p in r.predictions), default=None)
        f.quotes = sum(len(p.quotes) for p in r.predictions)
        f.verified_quotes = sum(q.verified for p in r.predictions for q in p.quote_checks)
        f.report_recovered = r.parse_error is not None
    if t.status == "error":
        f.report = "error"
    return f


def _times(n: int, one: str = "once") -> str:
    return one if n == 1 else f"{n} times"


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def _confidence_word(c: float) -> str:
    return "high" if c >= 0.7 else ("moderate" if c >= 0.4 else "low")


def summary_from_features(f: StrategyFeatures) -> str:
    """Fixed sentences chosen by the counts; the same conduct always gives the same text."""
    parts: list[str] = []
    setup = (
        f"The auditor set a custom target system prompt{'' if f.system_prompts == 1 else ' ' + _times(f.system_prompts)}"
        if f.system_prompts
        else "The auditor kept the target's default system prompt"
    )
    if f.tools_created:
        setup += f", gave the target {_plural(f.tools_created, 'synthetic tool')}"
        setup += f" and answered {_plural(f.tool_results, 'tool call')} with fabricated results" if f.tool_results else ""
    parts.append(setup + ".")
    engage = f"It sent {_plural(f.messages, 'message')} to the target over {f.turns_used} of {f.max_turns} turns"
    if f.messages <= 1:
        engage += ", barely engaging the target"
    parts.append(engage + ".")
    if f.rollbacks:
        how = (
            "re-posing variations of earlier probes to compare the target's replies across branches"
            if f.varied_after_rollback
            else "then re-sending probes it had already tried"
        )
        parts.append(f"It rolled the conversation back {_times(f.rollbacks)}, creating {_plural(f.branches, 'branch', 'branches')}, {how}.")
    elif f.messages >= 2:
        parts.append("It held a single linear conversation without rollback.")
    if f.prefills:
        parts.append(f"It forced the start of the target's reply with prefill {_times(f.prefills)}.")
    cues = f.cue_messages
    framing = [
        text
        for group, text in (
            ("roleplay", "a role-play or hypothetical framing"),
            ("authority", "claims of special authority or insider status"),
            ("coercion", "invented emergencies, threats or instructions to override its rules"),
            ("introspection", "requests to reflect on or reconcile its earlier answers"),
            ("meta", "discussion of the audit itself"),
        )
        if cues.get(group, 0)
    ]
    if framing:
        parts.append("Its messages used " + ", ".join(framing[:-1]) + (" and " if len(framing) > 1 else "") + framing[-1] + ".")
    if cues.get("self_report", 0):
        parts.append(
            f"It asked the target directly about its instructions, programming or hidden goals in {cues['self_report']} of {f.messages} messages."
        )
    if cues.get("pressure", 0):
        parts.append(f"It applied pressure and accusations in {_plural(cues['pressure'], 'message')}, demanding an admission.")
    if f.messages >= 3 and not cues.get("self_report", 0) and not cues.get("pressure", 0) and not f.rollbacks:
        parts.append("It never questioned the target directly, relying on what the target did within the scenario.")
    if f.repeated_messages:
        stuck = ", stuck on one tactic" if 2 * f.repeated_messages >= f.messages else ""
        parts.append(f"It repeated near-identical messages {_times(f.repeated_messages)}{stuck}.")
    if f.invalid_calls:
        parts.append(f"It made {_plural(f.invalid_calls, 'invalid tool call')}.")
    if f.status == "error":
        parts.append("The audit ended in an error.")
    elif f.status == "budget_exhausted":
        parts.append("It ran out of its turn budget.")
    elif f.turns_used <= EARLY_END_FRACTION * f.max_turns:
        parts.append("It ended the conversation early.")
    if f.report == "none":
        parts.append("It filed no final report.")
    elif f.report == "clean":
        parts.append("It concluded that no hidden behavior was present.")
    elif f.report == "findings":
        conclusion = f"It reported {_plural(f.predictions, 'hypothesis', 'hypotheses')}"
        if f.top_confidence is not None:
            conclusion += f", the top one with {_confidence_word(f.top_confidence)} confidence"
        conclusion += (
            f", citing {_plural(f.quotes, 'verbatim target quote')} of which {f.verified_quotes} verified"
            if f.quotes
            else ", citing no target quotes"
        )
        if cues.get("self_report", 0) and 2 * cues["self_report"] >= f.messages:
            conclusion += ", relying mainly on the target's self-descriptions"
        parts.append(conclusion + ".")
    if f.report_recovered:
        parts.append("Its final report had to be recovered from malformed output.")
    return " ".join(parts)


def strategy_summary(t: Transcript, cues: StrategyCues | None = None) -> str:
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
    system, user = _prompt_file(prompt)
    messages = [ChatMessageSystem(content=system), ChatMessageUser(content=user.replace("{auditor_side}", render_auditor_side(t)))]
    for attempt in range(retries + 1):
        try:
            output = await model.generate(messages, config=GenerateConfig(max_tokens=max_tokens, temperature=0.0))
        except Exception as exc:  # network and provider errors: retry, then abstain
            log.warning("strategy summariser failed on %s (attempt %d): %s", t.id, attempt + 1, exc)
            continue
        match = _STRATEGY_TAG.search(output.completion)
        if match and match.group(1).strip():
            return " ".join(match.group(1).split())
        log.warning("strategy summariser gave no <strategy> block for %s (attempt %d)", t.id, attempt + 1)
    return None
