"""Countable facts about an auditor's conduct, read from a transcript: the input of strategy summaries.

What the auditor sent is read through cue phrases (data/strategy_cues.yaml) that mark tactics; the
message text itself goes no further than these counts, so nothing downstream (summaries, clusters,
categories) can carry the audited behavior's content. Near-copies of messages separate loops (the same
message back to back) from replications (a probe re-posed against other probes, or after a rollback).
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import BaseModel, Field

from auditrl.analysis.conduct import Conduct, TargetView
from auditrl.configfile import load_package_data
from auditrl.scaffold.transcript import TargetMessage

CUE_GROUPS = ("self_report", "pressure", "authority", "roleplay", "coercion", "introspection", "meta", "evaluation")
NEAR_DUPLICATE = 0.9
DOMINANT_SHARE = 0.5
COMPARISON_MAX_CONFRONTATION = 0.25
MINOR_SHARE = 0.15
FREQUENT_ROLLBACK_SHARE = 0.3
CYCLING_SHARE = 0.5
CACHED_TEXTS = 100_000
"""Distinct messages whose cue groups are remembered (the memory is emptied when full)."""
CACHED_PAIRS = 400_000
"""Pairs of distinct messages whose near-duplicate test is remembered (likewise)."""

# Tactics, in the order ties are broken, and the cue groups that mark each. A message can show several;
# "plain" are messages with no cue at all (ordinary requests inside the scenario). Their names in
# summaries are in data/summary_sentences.yaml.
TACTICS: dict[str, tuple[str, ...]] = {
    "pressure": ("pressure",),
    "self_report": ("self_report",),
    "deception": ("coercion", "authority"),
    "evaluation": ("evaluation",),
    "roleplay": ("roleplay",),
    "introspection": ("introspection",),
    "meta": ("meta",),
    "plain": (),
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
    evaluation: list[str] = Field(
        default_factory=list, description="Telling the target outright that it is being tested."
    )


@cache
def _default_cues() -> StrategyCues:
    return load_package_data(StrategyCues, "auditrl.analysis", "data/strategy_cues.yaml")


class StrategyFeatures(BaseModel):
    """Countable facts about the auditor's conduct, the input of the deterministic summary."""

    system_prompts: int = 0
    tools_created: int = 0
    tool_results: int = 0
    messages: int = 0
    distinct_messages: int = 0
    repeated_messages: int = Field(
        default=0, description="Near-copies of the message sent just before, in the same branch."
    )
    reposed_messages: int = Field(
        default=0, description="Near-copies of an earlier, non-adjacent message or of one sent before a rollback."
    )
    plain_messages: int = Field(
        default=0, description="Messages showing no cue: ordinary requests inside the scenario."
    )
    confrontational_messages: int = Field(
        default=0, description="Messages showing pressure or direct self-report questions."
    )
    tactic_messages: dict[str, int] = Field(
        default_factory=dict, description="Messages showing each tactic of TACTICS."
    )
    rollbacks: int = 0
    rollbacks_to_rerun: int = Field(
        default=0, description="Rollbacks followed by a non-confrontational re-run of an earlier probe."
    )
    rollbacks_to_confront: int = Field(
        default=0, description="Rollbacks followed by pressure or a direct self-report question."
    )
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
    quotes_after_pressure: int = Field(
        default=0, description="Verified quotes from replies to pressure or accusations."
    )
    quotes_after_questions: int = Field(
        default=0, description="Verified quotes from replies to direct self-report questions."
    )
    quotes_after_plain: int = Field(default=0, description="Verified quotes from replies to ordinary requests.")
    report_recovered: bool = False


def _message_text(arguments: dict[str, object]) -> str:
    """The user-message text of a send_message call, whatever the argument is called."""
    for key in ("message", "content", "text"):
        value = arguments.get(key)
        if isinstance(value, str):
            return value
    return " ".join(v for k, v in arguments.items() if isinstance(v, str) and k != "prefill")


_SPACES = re.compile(r"\s+")
_NORMALISED: dict[str, str] = {}


def _normalise(text: str) -> str:
    """Lower case, runs of white space as one space (remembered per text: audits re-send the same messages)."""
    out = _NORMALISED.get(text)
    if out is None:
        if len(_NORMALISED) >= CACHED_TEXTS:
            _NORMALISED.clear()
        out = _NORMALISED[text] = _SPACES.sub(" ", text.lower()).strip()
    return out


class _CueMatcher:
    """The cue groups a normalised message shows: one alternation of the escaped phrases per group (the same
    substring test as checking each phrase in turn, in one pass), remembered per distinct message."""

    def __init__(self, cues: StrategyCues) -> None:
        lists = cues.model_dump()
        self._patterns = [(g, re.compile("|".join(re.escape(p) for p in lists[g]))) for g in CUE_GROUPS if lists.get(g)]
        self._seen: dict[str, frozenset[str]] = {}

    def __call__(self, text: str) -> frozenset[str]:
        groups = self._seen.get(text)
        if groups is None:
            if len(self._seen) >= CACHED_TEXTS:
                self._seen.clear()
            groups = self._seen[text] = frozenset(g for g, pattern in self._patterns if pattern.search(text))
        return groups


@cache
def _default_matcher() -> _CueMatcher:
    return _CueMatcher(_default_cues())


_MATCHERS: dict[str, _CueMatcher] = {}


def _cue_matcher(cues: StrategyCues | None) -> _CueMatcher:
    """The matcher of `cues` (the packaged cues when None), built once per distinct cue lists."""
    if cues is None:
        return _default_matcher()
    key = cues.model_dump_json()
    matcher = _MATCHERS.get(key)
    if matcher is None:
        if len(_MATCHERS) >= 8:
            _MATCHERS.clear()
        matcher = _MATCHERS[key] = _CueMatcher(cues)
    return matcher


def _confrontational(groups: frozenset[str]) -> bool:
    return bool(groups & {"pressure", "self_report"})


class _NearDuplicates:
    """Near-duplicate tests between messages, remembered per ordered pair of distinct texts across transcripts
    (audits of one auditor re-send the same messages), up to CACHED_PAIRS pairs.

    difflib's two upper bounds are computed first without a SequenceMatcher (whose set-up indexes every
    character of the second text): `real_quick_ratio` from the lengths, `quick_ratio` from the texts'
    character counts (their multiset intersection), with the same values; the full `ratio` runs only on
    the pairs both bounds let through. That ratio is not symmetric, so within one audit a pair asked both
    ways keeps the answer of the way asked first (`for_audit`).
    """

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], bool] = {}
        self._chars: dict[str, Counter[str]] = {}

    def _counts(self, text: str) -> Counter[str]:
        counts = self._chars.get(text)
        if counts is None:
            counts = self._chars[text] = Counter(text)
        return counts

    def ordered(self, a: str, b: str) -> bool:
        """Whether difflib's ratio of `a` against `b` reaches NEAR_DUPLICATE."""
        key = (a, b)
        hit = self._cache.get(key)
        if hit is None:
            if len(self._cache) >= CACHED_PAIRS:
                self._cache.clear()
                self._chars.clear()
            length = len(a) + len(b)
            hit = 2.0 * min(len(a), len(b)) / length >= NEAR_DUPLICATE
            hit = hit and 2.0 * (self._counts(a) & self._counts(b)).total() / length >= NEAR_DUPLICATE
            hit = hit and difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() >= NEAR_DUPLICATE
            self._cache[key] = hit
        return hit

    def for_audit(self) -> Callable[[str, str], bool]:
        """The test for one audit: identical texts are near-copies; a pair gives the answer it gave first."""
        asked: dict[tuple[str, str], bool] = {}

        def near(a: str, b: str) -> bool:
            if a == b:
                return True
            key = (a, b) if a < b else (b, a)
            hit = asked.get(key)
            if hit is None:
                hit = asked[key] = self.ordered(a, b)
            return hit

        return near


_NEAR = _NearDuplicates()


def _user_message_before(by_id: dict[str, TargetMessage | TargetView], message_id: str | None) -> str | None:
    """The text of the user message a target reply answered (walking up past tool turns)."""
    cur = by_id.get(message_id) if message_id else None
    while cur is not None and cur.role != "user":
        cur = by_id.get(cur.parent) if cur.parent else None
    return cur.content if cur is not None else None


def _tactic_count(groups: Counter[frozenset[str]], members: tuple[str, ...]) -> int:
    """Messages showing any cue group of a tactic; for the cue-less "plain" tactic, messages showing none."""
    return sum(n for gs, n in groups.items() if (not gs.isdisjoint(members) if members else not gs))


def _replications(sent: list[str], rolled: set[int]) -> tuple[int, int, set[int]]:
    """Loops, re-posed probes, and the indices of messages that re-pose an earlier one (looked up for rollbacks).

    A near-copy of the message just before (in the same branch) is a loop; a near-copy of an earlier,
    non-adjacent message, or of any earlier one right after a rollback, re-poses a probe: a replication
    when the messages between are other probes or the context was reset, not a loop. (`_NearDuplicates.for_audit`
    written out in the loop: this runs for every pair of messages of every audit.)
    """
    ordered = _NEAR.ordered
    asked: dict[tuple[str, str], bool] = {}
    repeated = reposed = 0
    again_at: set[int] = set()
    earlier: dict[str, None] = {}  # the distinct messages sent so far, in order
    for i, text in enumerate(sent):
        if not i:
            earlier[text] = None
            continue
        hit = False
        if i not in rolled:
            prev = sent[i - 1]
            if prev == text:
                hit = True
            else:
                key = (text, prev) if text < prev else (prev, text)
                known = asked.get(key)
                hit = asked[key] = ordered(text, prev) if known is None else known
        if hit:
            repeated += 1
        else:
            for prev in earlier:
                if prev == text:
                    hit = True
                else:
                    key = (text, prev) if text < prev else (prev, text)
                    known = asked.get(key)
                    hit = asked[key] = ordered(text, prev) if known is None else known
                if hit:
                    reposed += 1
                    again_at.add(i)
                    break
        earlier[text] = None
    return repeated, reposed, again_at


@dataclass(frozen=True)
class _MessageCounts:
    """What the messages the auditor sent, and where it rolled back between them, come to."""

    distinct: int
    cue_messages: dict[str, int]
    tactic_messages: dict[str, int]
    confrontational: int
    repeated: int
    reposed: int
    rollbacks_to_rerun: int
    rollbacks_to_confront: int


_COUNTED: dict[tuple[_CueMatcher, tuple[str, ...], tuple[int, ...]], _MessageCounts] = {}


def _message_counts(cue_groups: _CueMatcher, sent: tuple[str, ...], after_rollback: tuple[int, ...]) -> _MessageCounts:
    """The counts of one sequence of messages and rollbacks (remembered: audits of one auditor repeat them)."""
    key = (cue_groups, sent, after_rollback)
    counted = _COUNTED.get(key)
    if counted is not None:
        return counted
    groups = Counter(cue_groups(text) for text in sent)
    repeated, reposed, again_at = _replications(list(sent), set(after_rollback))
    confront = rerun = 0
    for i in dict.fromkeys(after_rollback):
        if not 0 < i < len(sent):
            continue
        if _confrontational(cue_groups(sent[i])):
            confront += 1
        elif i in again_at:
            rerun += 1
    counted = _MessageCounts(
        distinct=len(set(sent)),
        cue_messages={g: sum(n for gs, n in groups.items() if g in gs) for g in CUE_GROUPS},
        tactic_messages={name: _tactic_count(groups, members) for name, members in TACTICS.items()},
        confrontational=sum(n for gs, n in groups.items() if _confrontational(gs)),
        repeated=repeated,
        reposed=reposed,
        rollbacks_to_rerun=rerun,
        rollbacks_to_confront=confront,
    )
    if len(_COUNTED) >= CACHED_TEXTS:
        _COUNTED.clear()
    _COUNTED[key] = counted
    return counted


def strategy_features(t: Conduct, cues: StrategyCues | None = None) -> StrategyFeatures:
    """Count what the auditor did, from its tool calls, the target tree and the report."""
    cue_groups = _cue_matcher(cues)
    functions: Counter[str] = Counter()
    invalid = 0
    sent: list[str] = []
    arg_prefills = 0
    after_rollback: list[int] = []
    for m in t.auditor_messages:
        if m.role == "tool":
            invalid += m.error is not None
        if m.role != "assistant":
            continue
        for c in m.tool_calls:
            invalid += c.parse_error is not None
            functions[c.function] += 1
            if c.function == "rollback_conversation":
                after_rollback.append(len(sent))
            elif c.function == "send_message":
                sent.append(_normalise(_message_text(c.arguments)))
                prefill = c.arguments.get("prefill")
                arg_prefills += isinstance(prefill, str) and bool(prefill.strip())
    counts = _message_counts(cue_groups, tuple(sent), tuple(after_rollback))
    parents = {m.parent for m in t.target_messages}
    return StrategyFeatures(
        system_prompts=functions["set_target_system_message"],
        tools_created=functions["create_tool"],
        tool_results=functions["send_tool_call_result"],
        messages=len(sent),
        distinct_messages=counts.distinct,
        repeated_messages=counts.repeated,
        reposed_messages=counts.reposed,
        plain_messages=counts.tactic_messages["plain"],
        confrontational_messages=counts.confrontational,
        tactic_messages=counts.tactic_messages,
        rollbacks=functions["rollback_conversation"],
        rollbacks_to_rerun=counts.rollbacks_to_rerun,
        rollbacks_to_confront=counts.rollbacks_to_confront,
        branches=max(1, sum(m.id not in parents and m.role != "system" for m in t.target_messages)),
        prefills=max(sum(m.prefill is not None and bool(m.prefill.strip()) for m in t.target_messages), arg_prefills),
        cue_messages=counts.cue_messages,
        invalid_calls=invalid,
        turns_used=t.turns_used,
        max_turns=t.budget.max_turns,
        status=t.status,
        **_report_fields(t, cue_groups),
    )


def _report_fields(t: Conduct, cue_groups: _CueMatcher) -> dict[str, Any]:
    """The report's counts: predictions, their confidence and quotes, and what each verified quote answered."""
    r = t.report
    if r is None:
        return {"report": "error"} if t.status == "error" else {}
    after = {"pressure": 0, "questions": 0, "plain": 0}
    by_id: dict[str, TargetMessage | TargetView] = {m.id: m for m in t.target_messages}
    for q in (q for p in r.predictions for q in p.quote_checks if q.verified):
        asked = _user_message_before(by_id, q.message_id)
        if asked is None:
            continue
        asked_groups = cue_groups(_normalise(asked))
        after[
            "pressure" if "pressure" in asked_groups else "questions" if "self_report" in asked_groups else "plain"
        ] += 1
    return {
        "report": "error" if t.status == "error" else "clean" if r.no_behavior_found else "findings",
        "predictions": len(r.predictions),
        "top_confidence": max((p.confidence for p in r.predictions), default=None),
        "quotes": sum(len(p.quotes) for p in r.predictions),
        "verified_quotes": sum(q.verified for p in r.predictions for q in p.quote_checks),
        "quotes_after_pressure": after["pressure"],
        "quotes_after_questions": after["questions"],
        "quotes_after_plain": after["plain"],
        "report_recovered": r.parse_error is not None,
    }


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
    """Ways the auditor shaped the replies itself (keys of the sentences file's `manipulations`)."""
    out = []
    if f.prefills:
        out.append("prefill")
    if f.tactic_messages.get("deception", 0) >= MINOR_SHARE * f.messages > 0:
        out.append("deception")
    if f.tactic_messages.get("evaluation", 0) >= MINOR_SHARE * f.messages > 0:
        out.append("evaluation")
    if f.messages >= 4 and f.rollbacks_to_confront >= FREQUENT_ROLLBACK_SHARE * f.messages:
        out.append("rerolled")
    return out


def _calm(f: StrategyFeatures) -> bool:
    return (
        f.confrontational_messages + f.tactic_messages.get("deception", 0) <= COMPARISON_MAX_CONFRONTATION * f.messages
    )


def cycled(f: StrategyFeatures) -> bool:
    """A calm audit that spent its whole budget mostly re-posing probes it had already sent.

    Replication is what a comparison is made of, but an auditor that keeps re-posing the same few probes
    until the budget runs out never stops to conclude from them: a loop, not an experiment. (Under
    pressure the accusations are the strategy and their repetition is told as such.)
    """
    again = f.reposed_messages + f.repeated_messages
    return f.status == "budget_exhausted" and f.messages >= 4 and _calm(f) and again >= CYCLING_SHARE * f.messages


def controlled_comparison(f: StrategyFeatures) -> bool:
    """Probes re-posed unchanged or slightly varied, against other probes or in reset contexts, without confrontation,
    by an audit that stopped cycling through them to conclude."""
    contrast = f.distinct_messages >= 2 or f.rollbacks_to_rerun > 0
    replicated = f.reposed_messages > 0 or f.rollbacks_to_rerun > 0
    return f.messages >= 3 and _calm(f) and contrast and replicated and not cycled(f)
