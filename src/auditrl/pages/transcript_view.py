"""Transcripts as page sections: the target's conversation tree, the auditor's turns and the checked report.

The view is plain data (strings, lists, flags) that the page template renders with autoescape, so
everything a model wrote (replies, tool arguments, prefills, quotes, even ids) reaches the page only
as escaped text. A rollback makes the target conversation a tree; the view keeps every branch, marks
the one the audit ended on, and shows a prefill apart from what the target generated after it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from auditrl.pages.verdicts import OUTCOMES, VerdictView, audit_outcome, verdict_line, verdicts
from auditrl.scaffold.transcript import TargetMessage, ToolCallRecord, Transcript

DEFAULT_SHOWN = 6
"""Transcripts a report shows by default: enough to read a few audits, small enough to keep the page light."""
PICKED = (
    "picked in turn from each auditor's planted and benign audits, and within those from each verdict "
    "(identified, missed, false positive, correctly clean) in turn, in the order the audits were stored"
)
"""How `pick_transcripts` chooses, in words, for the page to say."""
LONG_SYSTEM = 600
"""A system message longer than this (characters) is folded under its first line, so the first turn shows."""


@dataclass
class CallView:
    """A tool call (or a synthetic tool's definition) with its arguments as indented JSON text."""

    function: str
    arguments: str
    error: str | None = None


@dataclass
class MessageView:
    """One target-tree node; `text` is what was generated after the auditor's `prefill`."""

    id: str
    role: str
    prefill: str
    prefill_mode: str | None
    text: str
    calls: list[CallView]
    status: str | None
    on_final_branch: bool
    folded: bool = False


@dataclass
class ThreadView:
    """Messages that follow one another without a fork; `branches` continue from the last one."""

    messages: list[MessageView]
    branches: list[ThreadView]


@dataclass
class AuditorTurnView:
    turn: int
    role: str
    text: str
    calls: list[CallView]
    error: str | None
    folded: bool = False


@dataclass
class QuoteView:
    """A quoted piece of evidence; status is verified, unverified or unchecked (no check recorded)."""

    text: str
    status: str
    message_id: str | None


@dataclass
class PredictionView:
    rank: int
    description: str
    confidence: str
    reasoning: str
    quotes: list[QuoteView]


@dataclass
class ReportView:
    no_behavior_found: bool
    summary: str
    parse_error: str | None
    predictions: list[PredictionView]


@dataclass
class TranscriptView:
    """Everything the template shows of one transcript, all as text."""

    id: str
    facts: list[tuple[str, str]]
    plant: str
    planted: bool
    outcome: str
    archetype: str | None
    verdict: str
    verdicts: list[VerdictView]
    seed_instructions: str
    tools: list[CallView]
    tree: ThreadView
    rollbacks: int
    auditor: list[AuditorTurnView]
    report: ReportView | None


def _calls(calls: Sequence[ToolCallRecord]) -> list[CallView]:
    return [CallView(c.function, json.dumps(c.arguments, ensure_ascii=False, indent=2), c.parse_error) for c in calls]


def _folded(role: str, text: str) -> bool:
    return role == "system" and len(text) > LONG_SYSTEM


def _message(m: TargetMessage, final: set[str]) -> MessageView:
    text = m.generated()
    return MessageView(
        m.id,
        m.role,
        m.prefill or "",
        m.prefill_mode,
        text,
        _calls(m.tool_calls),
        m.tool_status,
        m.id in final,
        _folded(m.role, text),
    )


def _tree(t: Transcript) -> ThreadView:
    """The target messages as threads that fork where the auditor rolled back and went on differently."""
    children: dict[str | None, list[TargetMessage]] = defaultdict(list)
    for m in t.target_messages:
        children[m.parent].append(m)
    final = {m.id for m in t.branch()} if t.head is not None else set()

    def thread(start: list[TargetMessage]) -> ThreadView:
        if len(start) != 1:
            return ThreadView([], [thread([c]) for c in start])
        messages: list[MessageView] = []
        node = start[0]
        while True:
            messages.append(_message(node, final))
            nxt = children.get(node.id, [])
            if len(nxt) != 1:
                return ThreadView(messages, [thread([c]) for c in nxt])
            node = nxt[0]

    return thread(children.get(None, []))


def _report(t: Transcript) -> ReportView | None:
    if t.report is None:
        return None
    predictions = []
    for p in t.report.predictions:
        checks = {q.quote: q for q in p.quote_checks}
        quotes = [
            QuoteView(q, "unchecked", None)
            if q not in checks
            else QuoteView(q, "verified" if checks[q].verified else "unverified", checks[q].message_id)
            for q in p.quotes
        ]
        predictions.append(PredictionView(p.rank, p.description, f"{100 * p.confidence:.0f}%", p.reasoning, quotes))
    return ReportView(t.report.no_behavior_found, t.report.summary, t.report.parse_error, predictions)


def _facts(t: Transcript) -> list[tuple[str, str]]:
    facts: list[tuple[str, Any]] = [
        ("auditor", t.auditor_model),
        ("target", t.target_model),
        ("hidden plant", t.behavior_id or "none (benign target)"),
        ("seed", t.seed_id),
        ("status", t.status + (f": {t.error}" if t.error else "")),
        ("turns", f"{t.turns_used} of {t.budget.max_turns}"),
    ]
    return [(k, str(v)) for k, v in facts]


def transcript_view(t: Transcript, archetype: str | None = None) -> TranscriptView:
    """The view of `t`; `archetype` is its strategy archetype where a strategy analysis classified it."""
    found = verdicts(t)
    return TranscriptView(
        id=t.id,
        facts=_facts(t),
        plant=t.target_system_prompt,
        planted=not t.benign,
        outcome=audit_outcome(t),
        archetype=archetype,
        verdict=verdict_line(t, found),
        verdicts=found,
        seed_instructions=t.seed_instructions,
        tools=[CallView(s.name, json.dumps(s.parameters, ensure_ascii=False, indent=2), None) for s in t.target_tools],
        tree=_tree(t),
        rollbacks=sum(c.function == "rollback_conversation" for m in t.auditor_messages for c in m.tool_calls),
        auditor=[
            AuditorTurnView(m.turn, m.role, m.content, _calls(m.tool_calls), m.error, _folded(m.role, m.content))
            for m in t.auditor_messages
        ],
        report=_report(t),
    )


def _verdicts_in_turn(transcripts: list[Transcript]) -> list[Transcript]:
    """The transcripts reordered so that each verdict comes up in turn (file order within a verdict)."""
    by_outcome: dict[str, list[Transcript]] = defaultdict(list)
    for t in transcripts:
        by_outcome[audit_outcome(t)].append(t)
    order = sorted(by_outcome, key=lambda o: OUTCOMES.index(o) if o in OUTCOMES else len(OUTCOMES))
    queues = [by_outcome[o] for o in order]
    return [q[depth] for depth in range(max(map(len, queues), default=0)) for q in queues if depth < len(q)]


def pick_transcripts(transcripts: Sequence[Transcript], limit: int = DEFAULT_SHOWN) -> list[Transcript]:
    """Up to `limit` transcripts, spread over auditors, over planted and benign targets and over verdicts
    (see `PICKED`), so a page shows a found behavior beside a missed one, a false positive beside a clean one."""
    grouped: dict[tuple[str, bool], list[Transcript]] = defaultdict(list)
    for t in transcripts:
        grouped[(t.auditor_model, t.benign)].append(t)
    by_kind = {kind: _verdicts_in_turn(ts) for kind, ts in grouped.items()}
    picked: list[Transcript] = []
    depth = 0
    while len(picked) < limit and any(depth < len(v) for v in by_kind.values()):
        picked += [v[depth] for v in by_kind.values() if depth < len(v)][: limit - len(picked)]
        depth += 1
    return picked
