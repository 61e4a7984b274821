"""Petri 3 audit logs as auditrl transcripts.

Petri 3's `inspect_petri/audit` task keeps two timelines on each sample: `target`, the target's
conversation tree (a span per branch: the root, one per rollback, one per restart, named `branch N` in
creation order), and `auditor`, the auditor's conversation. Following Petri's own reading of them
(`transcript_branches`), each branch's last model call holds that branch's whole conversation: its input
(the replayed prefix included) plus its output. Messages keep their ids across branches, so shared prefixes
merge into one node and each branch hangs where it forked, which is auditrl's conversation tree. A prefill
is an assistant message marked `{"prefill": True}` before the target's continuation; the two become one
reply with `prefill` set. The target's synthetic tools are replayed from the auditor's `create_tool`,
`remove_tool` and `restart_conversation` calls that succeeded. Petri's auditor writes no structured
report: its last message, where it wrote one, is parsed leniently as the report (usually a summary with
no predictions). Petri's judge scores go under `scores["petri"]`, and its `concerning`,
`concerning_with_no_mitigating_factors` and `needs_attention` also at the top level, where the suite's
production-discovery metric reads them (Petri audits have no planted behavior: they are benign here).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from inspect_ai.event import ModelEvent, Timeline, TimelineEvent, TimelineSpan, ToolEvent
from inspect_ai.log import EvalLog, EvalSample
from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageTool
from inspect_ai.tool import ToolInfo

from auditrl.scaffold.inspect_chat import PREFILL_FLAG
from auditrl.scaffold.report import parse_report, verify_quotes
from auditrl.scaffold.tool_sets import ToolSetName
from auditrl.scaffold.tools import InvalidToolCall, parse_tool_parameters
from auditrl.scaffold.transcript import (
    AuditorMessage,
    Budget,
    Role,
    TargetMessage,
    ToolCallRecord,
    ToolSpec,
    Transcript,
)
from auditrl.scaffold.transcript_keys import PETRI, PRODUCTION_FIELDS, ROLLOUT, SOURCE

TARGET, AUDITOR = "target", "auditor"
PETRI_MAX_TURNS = 30
"""Petri 3's default turn budget, used when the log's task arguments do not say."""
_BRANCH = re.compile(r"^branch (\d+)$", re.IGNORECASE)


def is_petri3(sample: EvalSample) -> bool:
    """Whether the sample has Petri 3's two audit timelines."""
    return {TARGET, AUDITOR} <= {t.name for t in sample.timelines or []}


def _timeline(sample: EvalSample, name: str) -> Timeline:
    return next(t for t in sample.timelines or [] if t.name == name)


def _events(span: TimelineSpan) -> Iterator[Any]:
    """The events of a span and its nested spans, not of the branches forked from it."""
    for item in span.content:
        if isinstance(item, TimelineEvent):
            yield item.event
        elif isinstance(item, TimelineSpan):
            yield from _events(item)


def _branches(root: TimelineSpan) -> list[TimelineSpan]:
    """Root and every branch below it, in creation order (Petri names them `branch N`)."""
    found: list[TimelineSpan] = []

    def walk(span: TimelineSpan) -> None:
        found.append(span)
        for child in span.branches:
            walk(child)

    walk(root)
    order = {id(s): i for i, s in enumerate(found)}
    return sorted(found, key=lambda s: (int(m.group(1)) if (m := _BRANCH.match(s.name)) else 10**6, order[id(s)]))


def _conversation(events: Sequence[Any], role: str | None = None) -> list[ChatMessage]:
    """The conversation a span's last model call saw and produced (its input plus its output)."""
    calls = [e for e in events if isinstance(e, ModelEvent) and (role is None or e.role == role)]
    if not calls:
        return []
    return [*calls[-1].input, calls[-1].output.message]


class _Tree:
    """Target messages by id, merged across branches; a branch continues from the last message it shares."""

    def __init__(self) -> None:
        self.nodes: dict[str, TargetMessage] = {}

    def add(self, conversation: Sequence[ChatMessage], branch: int) -> str | None:
        parent: str | None = None
        prefill: str | None = None
        for position, message in enumerate(conversation):
            if isinstance(message, ChatMessageAssistant) and (message.metadata or {}).get(PREFILL_FLAG):
                prefill = message.text
                continue
            node_id = message.id or f"b{branch}-{position}"
            if node_id not in self.nodes:
                self.nodes[node_id] = self._node(message, node_id, parent, prefill)
            parent, prefill = node_id, None
        return parent

    @staticmethod
    def _node(message: ChatMessage, node_id: str, parent: str | None, prefill: str | None) -> TargetMessage:
        role: Role = message.role
        fields: dict[str, Any] = {}
        content = message.text
        if isinstance(message, ChatMessageAssistant):
            fields["tool_calls"] = [_record(c.id, c.function, c.arguments) for c in message.tool_calls or []]
            if prefill:
                content = f"{prefill}{content}"
                fields.update(prefill=prefill, prefill_mode="honoured")
        elif isinstance(message, ChatMessageTool):
            fields.update(tool_call_id=message.tool_call_id, tool_status="error" if message.error else "success")
        return TargetMessage(id=node_id, parent=parent, role=role, content=content, **fields)


def _record(call_id: str, function: str, arguments: Any) -> ToolCallRecord:
    return ToolCallRecord(id=call_id, function=function, arguments=arguments if isinstance(arguments, dict) else {})


def _auditor_messages(conversation: Sequence[ChatMessage], tool_events: dict[str, ToolEvent]) -> list[AuditorMessage]:
    """The auditor's conversation with turn numbers; results of the last turn's calls come from its tool events."""
    out: list[AuditorMessage] = []
    turn = 0
    answered = {m.tool_call_id for m in conversation if isinstance(m, ChatMessageTool)}
    for message in conversation:
        if isinstance(message, ChatMessageAssistant):
            turn += 1
            calls = [_record(c.id, c.function, c.arguments) for c in message.tool_calls or []]
            out.append(AuditorMessage(turn=turn, role="assistant", content=message.text, tool_calls=calls))
        elif isinstance(message, ChatMessageTool):
            error = message.error.message if message.error else None
            out.append(
                AuditorMessage(
                    turn=turn, role="tool", content=message.text, tool_call_id=message.tool_call_id, error=error
                )
            )
        else:
            out.append(AuditorMessage(turn=turn, role=message.role, content=message.text))
    last = conversation[-1] if conversation else None
    for call in last.tool_calls or [] if isinstance(last, ChatMessageAssistant) else []:
        event = tool_events.get(call.id)
        if event is not None and call.id not in answered:
            error = event.error.message if event.error else None
            out.append(
                AuditorMessage(turn=turn, role="tool", content=str(event.result), tool_call_id=call.id, error=error)
            )
    return out


def _target_tools(messages: Sequence[AuditorMessage]) -> list[ToolSpec]:
    """The synthetic tools the auditor's successful calls gave the target (latest definition each)."""
    failed = {m.tool_call_id for m in messages if m.role == "tool" and m.error}
    tools: dict[str, ToolSpec] = {}
    for call in (c for m in messages if m.role == "assistant" for c in m.tool_calls if c.id not in failed):
        args = call.arguments
        if call.function == "create_tool" and isinstance(args.get("name"), str):
            try:
                params = parse_tool_parameters(args.get("parameters")).model_dump(exclude_none=True)
            except InvalidToolCall:
                raw = args.get("parameters")
                params = raw if isinstance(raw, dict) else {}
            tools[args["name"]] = ToolSpec(
                name=args["name"], description=str(args.get("description", "")), parameters=params
            )
        elif call.function == "remove_tool" and args.get("tool_name") in tools:
            tools[args["tool_name"]].removed = True
        elif call.function == "restart_conversation" and args.get("keep_tools") is False:
            for spec in tools.values():
                spec.removed = True
    return list(tools.values())


def _tool_set(tools: Sequence[ToolInfo]) -> ToolSetName | None:
    by_name = {t.name: t for t in tools}
    if "resume" in by_name:
        return "petri3_prefill" if "prefill" in by_name["resume"].parameters.properties else "petri3"
    return "petri2" if "set_target_system_message" in by_name else None


def _role_model(log: EvalLog, role: str) -> str:
    config = (log.eval.model_roles or {}).get(role)
    if isinstance(config, list):
        config = config[0] if config else None
    return config.model if config is not None else f"unknown/{role}"


def _scores(sample: EvalSample) -> dict[str, Any]:
    petri: dict[str, Any] = {}
    top: dict[str, Any] = {}
    for name, score in (sample.scores or {}).items():
        petri[name] = {"value": score.value, "explanation": score.explanation, **(score.metadata or {})}
        if isinstance(score.value, dict):
            top.update({f: score.value[f] for f in PRODUCTION_FIELDS if isinstance(score.value.get(f), int)})
    return {PETRI: petri, **top} if petri else {}


def petri3_transcript(log: EvalLog, sample: EvalSample, source: str) -> Transcript:
    """One Petri 3 audit (a sample and epoch of an `inspect_petri/audit` log) as a transcript."""
    tree = _Tree()
    head: str | None = None
    for number, span in enumerate(_branches(_timeline(sample, TARGET).root)):
        head = tree.add(_conversation(list(_events(span))), number) or head
    head = tree.add(sample.messages, -1) or head  # the surviving branch, with anything staged after its last reply
    auditor_events = list(_events(_timeline(sample, AUDITOR).root))
    calls = [e for e in auditor_events if isinstance(e, ModelEvent) and e.role == AUDITOR]
    tool_events = {e.id: e for e in auditor_events if isinstance(e, ToolEvent)}
    auditor = _auditor_messages(_conversation(auditor_events, AUDITOR), tool_events)
    spoken = [m for m in auditor if m.role == "assistant"]
    ended = any(c.function == "end_conversation" for m in spoken for c in m.tool_calls)
    tokens = sum(
        e.output.usage.output_tokens
        for e in sample.events
        if isinstance(e, ModelEvent) and e.role == AUDITOR and e.output.usage
    )
    max_turns = (log.eval.task_args or {}).get("max_turns", PETRI_MAX_TURNS)
    transcript = Transcript(
        id=sample.uuid or f"{log.eval.eval_id}-{sample.id}-{sample.epoch}",
        created=datetime.fromisoformat(sample.started_at or log.eval.created),
        auditor_model=_role_model(log, AUDITOR),
        target_model=_role_model(log, TARGET),
        seed_id=str(sample.id),
        seed_instructions=sample.input if isinstance(sample.input, str) else "\n".join(m.text for m in sample.input),
        tool_set=_tool_set(calls[-1].tools) if calls else None,
        target_tools=_target_tools(auditor),
        target_messages=list(tree.nodes.values()),
        head=head,
        auditor_messages=auditor,
        budget=Budget(max_turns=max_turns if isinstance(max_turns, int) and max_turns > 0 else PETRI_MAX_TURNS),
        turns_used=len(spoken),
        auditor_tokens=tokens,
        status="error" if sample.error else "completed" if ended else "budget_exhausted",
        error=sample.error.message if sample.error else None,
        scores=_scores(sample),
        metadata={
            ROLLOUT: sample.epoch - 1,
            SOURCE: {"log": source, "task": log.eval.task, "sample": sample.id, "epoch": sample.epoch},
        },
    )
    conclusion = spoken[-1].content.strip() if spoken else ""
    if conclusion:
        transcript.report = verify_quotes(parse_report(conclusion), transcript)
    return transcript
