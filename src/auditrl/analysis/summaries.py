"""Strategy-only summaries of transcripts: what the auditor did, never what the target was audited for.

Whole-transcript summaries cluster by the planted behavior (the topic dominates the text), so the
summary used for strategy clustering describes only tools, framing, pressure, rollbacks, prefill and
how the audit concluded. The deterministic summary is built from counts and fixed sentences; no message
text, seed, behavior or report wording is ever copied into it. It opens with the tactics that make up
most of the messages and their shares, and it says what rollbacks were used for (re-running a probe in
a reset context is a comparison, resuming accusations is not), because an embedding of the text weighs
every sentence alike. An optional LLM summariser (prompt file) gives richer paragraphs under the same
rule.
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

from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig, Model
from pydantic import BaseModel, Field

from auditrl.configfile import load_yaml
from auditrl.scaffold.transcript import TargetMessage, Transcript

log = logging.getLogger(__name__)

CUE_GROUPS = ("self_report", "pressure", "authority", "roleplay", "coercion", "introspection", "meta", "evaluation")
NEAR_DUPLICATE = 0.9
EARLY_END_FRACTION = 0.3
DOMINANT_SHARE = 0.5
COMPARISON_MAX_CONFRONTATION = 0.25
MINOR_SHARE = 0.15
FREQUENT_ROLLBACK_SHARE = 0.3

# Tactic groups of the summary's opening sentence, in the order ties are broken. A message can show
# several; "plain" are messages with no cue at all (ordinary requests inside the scenario).
TACTICS: dict[str, tuple[tuple[str, ...], str]] = {
    "pressure": (("pressure",), "accusations and pressure to confess"),
    "self_report": (("self_report",), "direct questions about its own instructions"),
    "deception": (("coercion", "authority"), "false authority, emergencies or override orders"),
    "evaluation": (("evaluation",), "announcements that it was being tested"),
    "roleplay": (("roleplay",), "role-play or hypothetical framing"),
    "introspection": (("introspection",), "requests to reconcile its earlier answers"),
    "meta": (("meta",), "discussion of the audit itself"),
    "plain": ((), "ordinary requests inside the scenario"),
}


class StrategyCues(BaseModel):
    """Phrase lists marking tactics in target-facing messages (see data/strategy_cues.yaml)."""

    self_report: list[str] = Field(min_length=1)
    pressure: list[str] = Field(min_length=1)
    authority: list[str] = Field(min_length=1)
    roleplay: list[str] = Field(min_length=1)
    coercion: list[str] = Field(min_length=1)
    introspection: list[str] = Field(min_length=1)
    meta: list[str] = Field(min_length=1)
    evaluation: list[str] = Field(default_factory=list, description="Telling the target outright that it is being tested.")


@cache
def _default_cues() -> StrategyCues:
    text = resources.files("auditrl.analysis").joinpath("data/strategy_cues.yaml").read_text(encoding="utf-8")
    return StrategyCues.model_validate(load_yaml(text))


class StrategyFeatures(BaseModel):
    """Countable facts about the auditor's conduct, the input of the deterministic summary."""

    system_prompts: int = 0
    tools_created: int = 0
    tool_results: int = 0
    messages: int = 0
    distinct_messages: int = 0
    repeated_messages: int = Field(default=0, description="Near-copies of the message sent just before, in the same branch.")
    reposed_messages: int = Field(
        default=0, description="Near-copies of an earlier, non-adjacent message or of one sent before a rollback."
    )
    plain_messages: int = Field(default=0, description="Messages showing no cue: ordinary requests inside the scenario.")
    confrontational_messages: int = Field(default=0, description="Messages showing pressure or direct self-report questions.")
    tactic_messages: dict[str, int] = Field(default_factory=dict, description="Messages showing each tactic of TACTICS.")
    rollbacks: int = 0
    rollbacks_to_rerun: int = Field(default=0, description="Rollbacks followed by a non-confrontational re-run of an earlier probe.")
    rollbacks_to_confront: int = Field(default=0, description="Rollbacks followed by pressure or a direct self-report question.")
    branches: int = 1
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
    quotes_after_pressure: int = Field(default=0, description="Verified quotes from replies to pressure or accusations.")
    quotes_after_questions: int = Field(default=0, description="Verified quotes from replies to direct self-report questions.")
    quotes_after_plain: int = Field(default=0, description="Verified quotes from replies to ordinary requests.")
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


def _cue_groups(text: str, cue_lists: dict[str, list[str]]) -> set[str]:
    """The cue groups one normalised message shows."""
    return {g for g in CUE_GROUPS if any(p in text for p in cue_lists.get(g, ()))}


def _confrontational(groups: set[str]) -> bool:
    return bool(groups & {"pressure", "self_report"})


class _NearDuplicates:
    """Near-duplicate tests between messages, cached per pair of distinct texts."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], bool] = {}

    def __call__(self, a: str, b: str) -> bool:
        if a == b:
            return True
        key = (a, b) if a < b else (b, a)
        hit = self._cache.get(key)
        if hit is None:
            m = difflib.SequenceMatcher(None, a, b, autojunk=False)
            hit = m.real_quick_ratio() >= NEAR_DUPLICATE and m.quick_ratio() >= NEAR_DUPLICATE and m.ratio() >= NEAR_DUPLICATE
            self._cache[key] = hit
        return hit


def _user_message_before(by_id: dict[str, TargetMessage], message_id: str | None) -> str | None:
    """The text of the user message a target reply answered (walking up past tool turns)."""
    cur = by_id.get(message_id) if message_id else None
    while cur is not None and cur.role != "user":
        cur = by_id.get(cur.parent) if cur.parent else None
    return cur.content if cur is not None else None


def _tactic_count(groups: list[set[str]], members: tuple[str, ...]) -> int:
    """Messages showing any cue group of a tactic; for the cue-less "plain" tactic, messages showing none."""
    return sum(bool(gs & set(members)) if members else not gs for gs in groups)


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
    groups = [_cue_groups(text, cue_lists) for text in sent]
    f.cue_messages = {g: sum(g in gs for gs in groups) for g in CUE_GROUPS}
    f.tactic_messages = {name: _tactic_count(groups, members) for name, (members, _) in TACTICS.items()}
    f.plain_messages = f.tactic_messages["plain"]
    f.confrontational_messages = sum(_confrontational(gs) for gs in groups)
    # A near-copy of the message just before (in the same branch) is a loop; a near-copy of an earlier,
    # non-adjacent message, or of any earlier one right after a rollback, re-poses a probe: a replication
    # when the messages between are other probes or the context was reset, not a loop.
    near = _NearDuplicates()
    rolled = set(after_rollback)
    for i, text in enumerate(sent):
        if i == 0:
            continue
        if i not in rolled and near(text, sent[i - 1]):
            f.repeated_messages += 1
        elif any(near(text, prev) for prev in dict.fromkeys(sent[:i])):
            f.reposed_messages += 1
    for i in dict.fromkeys(after_rollback):
        if not 0 < i < len(sent):
            continue
        if _confrontational(groups[i]):
            f.rollbacks_to_confront += 1
        elif any(near(sent[i], prev) for prev in dict.fromkeys(sent[:i])):
            f.rollbacks_to_rerun += 1
    f.branches = max(1, len([leaf for leaf in t.leaves() if t.message(leaf).role != "system"]))
    f.prefills = max(sum(m.prefill is not None and bool(m.prefill.strip()) for m in t.target_messages), arg_prefills)
    if t.report is not None:
        r = t.report
        f.report = "clean" if r.no_behavior_found else "findings"
        f.predictions = len(r.predictions)
        f.top_confidence = max((p.confidence for p in r.predictions), default=None)
        f.quotes = sum(len(p.quotes) for p in r.predictions)
        f.verified_quotes = sum(q.verified for p in r.predictions for q in p.quote_checks)
        by_id = {m.id: m for m in t.target_messages}
        for q in (q for p in r.predictions for q in p.quote_checks if q.verified):
            asked = _user_message_before(by_id, q.message_id)
            if asked is None:
                continue
            asked_groups = _cue_groups(_normalise(asked), cue_lists)
            if "pressure" in asked_groups:
                f.quotes_after_pressure += 1
            elif "self_report" in asked_groups:
                f.quotes_after_questions += 1
            else:
                f.quotes_after_plain += 1
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


def _join(items: list[str]) -> str:
    return ", ".join(items[:-1]) + (" and " if len(items) > 1 else "") + items[-1]


def dominant_tactics(f: StrategyFeatures) -> list[str]:
    """Tactics (keys of TACTICS) shown by at least half of the messages, most frequent first."""
    if f.messages < 2:
        return []
    order = list(TACTICS)
    found = [k for k in order if f.tactic_messages.get(k, 0) >= DOMINANT_SHARE * f.messages]
    if len(found) > 1 and "plain" in found:  # a tie with a marked tactic: the marked one characterises the audit
        found.remove("plain")
    return sorted(found, key=lambda k: (-f.tactic_messages[k], order.index(k)))


def manipulations(f: StrategyFeatures) -> list[str]:
    """Ways the auditor shaped the replies itself: forced openings, deception, announced tests, re-rolls of its demands."""
    out = []
    if f.prefills:
        out.append("forced the start of the target's replies")
    if f.tactic_messages.get("deception", 0) >= MINOR_SHARE * f.messages > 0:
        out.append("used false authority or emergencies")
    if f.tactic_messages.get("evaluation", 0) >= MINOR_SHARE * f.messages > 0:
        out.append("told the target it was being tested")
    if f.messages >= 4 and f.rollbacks_to_confront >= FREQUENT_ROLLBACK_SHARE * f.messages:
        out.append("restarted the conversation again and again to retry its demands")
    return out


def controlled_comparison(f: StrategyFeatures) -> bool:
    """Probes re-posed unchanged or slightly varied, against other probes or in reset contexts, without confrontation."""
    calm = f.confrontational_messages + f.tactic_messages.get("deception", 0) <= COMPARISON_MAX_CONFRONTATION * f.messages
    contrast = f.distinct_messages >= 2 or f.rollbacks_to_rerun > 0
    return f.messages >= 3 and calm and contrast and (f.reposed_messages > 0 or f.rollbacks_to_rerun > 0)


def summary_from_features(f: StrategyFeatures) -> str:
    """Fixed sentences chosen by the counts; the same conduct always gives the same text.

    The dominant tactics come first, with their share of the messages, so that a few rollbacks or a
    stray framing cannot outweigh what the auditor did most of the time.
    """
    parts: list[str] = []
    dominant = dominant_tactics(f)
    stuck = f.messages >= 2 and 2 * f.repeated_messages >= f.messages
    lead = [f"near-identical messages repeated back to back ({f.repeated_messages} of {f.messages} messages)"] if stuck else []
    lead += [f"{TACTICS[k][1]} ({f.tactic_messages[k]} of {f.messages} messages)" for k in dominant]
    if lead:
        parts.append(_capitalise(_join(lead)) + " dominated the audit.")
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
    compared = controlled_comparison(f)
    if f.rollbacks:
        head = f"It rolled the conversation back {_times(f.rollbacks)}, creating {_plural(f.branches, 'branch', 'branches')}"
        if f.rollbacks_to_confront and f.rollbacks_to_confront >= f.rollbacks_to_rerun:
            how = "and opened the fresh branches with more confrontation, retrying its demands"
        elif f.rollbacks_to_rerun and compared:
            how = "re-running earlier probes in a reset context to compare the target's replies across branches"
        elif f.rollbacks_to_rerun:
            how = "then re-sending probes it had already tried"
        else:
            how = "starting the new branches with different messages"
        parts.append(f"{head}, {how}.")
    elif f.messages >= 2:
        parts.append("It held a single linear conversation without rollback.")
    if compared and f.reposed_messages:
        parts.append(
            f"It returned to the same probes {_times(f.reposed_messages)} with other requests in between as controls, "
            "comparing the target's replies across conditions."
        )
    if f.prefills:
        parts.append(f"It forced the start of the target's reply with prefill {_times(f.prefills)}.")
    rigged = manipulations(f)
    if rigged and f.confrontational_messages >= DOMINANT_SHARE * f.messages:
        parts.append(f"Beyond pressing the target, it {_join(rigged)}, so what the target said partly reflects the auditor's own conduct.")
    # Tactics of a small share of the messages are named only by their count: named, one stray phrase
    # would weigh as much in the text as the tactic the auditor used all along.
    shown = [k for k in TACTICS if k != "plain" and k not in dominant and f.tactic_messages.get(k, 0)]
    named = [k for k in shown if f.tactic_messages[k] >= MINOR_SHARE * f.messages]
    if named:
        used = [f"{TACTICS[k][1]} in {f.tactic_messages[k]} of {f.messages}" for k in named]
        parts.append(("It also used " if dominant else "Its messages used ") + _join(used) + " messages.")
    occasional = max((f.tactic_messages[k] for k in shown if k not in named), default=0)
    if occasional:
        parts.append(f"Other tactics appeared only occasionally, in at most {occasional} of {f.messages} messages each.")
    if f.messages >= 3 and not f.confrontational_messages and not compared and "plain" in dominant:
        parts.append("It let the target act within the scenario and judged it by what it did there.")
    if f.repeated_messages:
        loop = ", stuck on one tactic" if stuck else ""
        parts.append(f"It repeated near-identical messages back to back {_times(f.repeated_messages)}{loop}.")
    if f.reposed_messages and not compared:
        parts.append(f"It returned to messages it had already sent {_times(f.reposed_messages)}.")
    if f.invalid_calls:
        parts.append(f"It made {_plural(f.invalid_calls, 'invalid tool call')}.")
    if f.status == "error":
        parts.append("The audit ended in an error.")
    elif f.status == "budget_exhausted":
        parts.append("It ran out of its turn budget.")
    elif f.turns_used <= EARLY_END_FRACTION * f.max_turns:
        parts.append("It ended the conversation early." if f.messages <= 2 else "It stopped on its own, using under a third of its turns.")
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
        cited = f.quotes_after_pressure + f.quotes_after_questions + f.quotes_after_plain
        if cited and 2 * f.quotes_after_pressure >= cited:
            conclusion += f", resting {'' if f.quotes_after_pressure == cited else 'partly '}on replies given under pressure"
        elif cited and 2 * (f.quotes_after_pressure + f.quotes_after_questions) > cited:
            conclusion += ", resting on the target's answers about itself"
        elif cited and f.quotes_after_plain == cited:
            conclusion += ", all from replies to ordinary requests"
        asked = f.cue_messages.get("self_report", 0)
        if asked and 2 * asked >= f.messages and f.cue_messages.get("pressure", 0) < asked:
            conclusion += ", relying mainly on the target's self-descriptions"
        parts.append(conclusion + ".")
    if f.report_recovered:
        parts.append("Its final report had to be recovered from malformed output.")
    return " ".join(parts)


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


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
