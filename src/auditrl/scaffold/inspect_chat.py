"""A transcript's two conversations in Inspect's terms: chat messages and the model calls that made them.

The target's conversation is shown as the target saw it (the hidden plant joined to the auditor's system
message), with an auditor's prefill as its own assistant message marked `{"prefill": True}`, the way
Petri 3 marks it, so no reader takes it for the target's words. Chat messages keep the target nodes' ids.
`audit_events` rebuilds one `ModelEvent` per auditor turn and per target reply from the recorded
conversations, in the order the audit made them, so `inspect view`'s transcript shows the audit as it ran.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from inspect_ai.event import Event, ModelEvent
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    GenerateConfig,
    ModelOutput,
)
from inspect_ai.tool import ToolCall, ToolCallError

from auditrl.scaffold.transcript import AuditorMessage, TargetMessage, Transcript

PREFILL_FLAG = "prefill"
"""Metadata key on the chat message that holds an auditor's prefill (Petri 3's marker)."""
_MESSAGE_ID = re.compile(r'message_id="([^"]+)"')


def _calls(records: Sequence) -> list[ToolCall] | None:  # ToolCallRecord
    calls = [ToolCall(id=c.id, function=c.function, arguments=c.arguments, parse_error=c.parse_error) for c in records]
    return calls or None


def target_chat(t: Transcript, nodes: Sequence[TargetMessage] | None = None) -> list[ChatMessage]:
    """A branch of the target's conversation (default: the current one) as the target saw it."""
    functions = {c.id: c.function for m in t.target_messages for c in m.tool_calls}
    chat: list[ChatMessage] = []
    for node in t.branch() if nodes is None else nodes:
        if node.role == "system":
            text = "\n\n".join(p for p in (t.target_system_prompt.strip(), node.content.strip()) if p)
            if text:
                chat.append(ChatMessageSystem(id=node.id, content=text))
        elif node.role == "user":
            chat.append(ChatMessageUser(id=node.id, content=node.content))
        elif node.role == "assistant":
            if node.prefill and node.prefill_mode != "ignored":
                chat.append(
                    ChatMessageAssistant(id=f"{node.id}-prefill", content=node.prefill, metadata={PREFILL_FLAG: True})
                )
            chat.append(ChatMessageAssistant(id=node.id, content=node.generated(), tool_calls=_calls(node.tool_calls)))
        else:
            error = ToolCallError("unknown", node.content) if node.tool_status == "error" else None
            chat.append(
                ChatMessageTool(
                    id=node.id,
                    content=node.content,
                    tool_call_id=node.tool_call_id,
                    function=functions.get(node.tool_call_id or ""),
                    error=error,
                )
            )
    return chat


def auditor_chat(messages: Sequence[AuditorMessage]) -> list[ChatMessage]:
    """The auditor's conversation as Inspect chat messages, tool results linked to their calls."""
    functions: dict[str, str] = {}
    chat: list[ChatMessage] = []
    for m in messages:
        if m.role == "system":
            chat.append(ChatMessageSystem(content=m.content))
        elif m.role == "user":
            chat.append(ChatMessageUser(content=m.content))
        elif m.role == "assistant":
            functions.update({c.id: c.function for c in m.tool_calls})
            chat.append(ChatMessageAssistant(content=m.content, tool_calls=_calls(m.tool_calls)))
        else:
            chat.append(
                ChatMessageTool(
                    content=m.content,
                    tool_call_id=m.tool_call_id,
                    function=functions.get(m.tool_call_id or ""),
                    error=ToolCallError("parsing", m.error) if m.error else None,
                )
            )
    return chat


def _event(t: Transcript, model: str, role: str, history: list[ChatMessage], reply: ChatMessage) -> ModelEvent:
    assert isinstance(reply, ChatMessageAssistant)
    return ModelEvent(
        timestamp=t.created,
        model=model,
        role=role,
        input=history,
        tools=[],
        tool_choice="auto",
        config=GenerateConfig(),
        output=ModelOutput.from_message(reply),
    )


def audit_events(t: Transcript) -> list[Event]:
    """One model call per auditor turn and per target reply, each target reply after the turn that asked for it.

    A target reply is placed after the auditor turn whose tool results name its message id; replies no
    result names (a rolled-back audit replayed elsewhere, say) come last."""
    target_events: dict[str, ModelEvent] = {}
    for node in t.target_said():
        branch = t.branch(node.id)
        chat = target_chat(t, branch)
        history = [m for m in chat if m.id != node.id]
        target_events[node.id] = _event(t, t.target_model, "target", history, chat[-1])
    chat = auditor_chat(t.auditor_messages)
    events: list[Event] = []
    for i, (message, record) in enumerate(zip(chat, t.auditor_messages, strict=True)):
        if record.role == "assistant":
            events.append(_event(t, t.auditor_model, "auditor", chat[:i], message))
        elif record.role == "tool":
            events += [target_events.pop(mid) for mid in _MESSAGE_ID.findall(record.content) if mid in target_events]
    return events + list(target_events.values())
