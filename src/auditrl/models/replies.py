"""What the target itself wrote, read from an auditor's conversation: the scripted auditors and AuditWorld's
scripted teacher quote it."""

from __future__ import annotations

import json
import re
from typing import Any

from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageTool

_TOOL_RESULT = re.compile(r"<tool_result[^>]*>(.*?)</tool_result>", re.DOTALL)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def _prefills(message: ChatMessage) -> list[str]:
    """The prefills the auditor set in this turn's calls (text-protocol blocks or native tool calls)."""
    if not isinstance(message, ChatMessageAssistant):
        return []
    arguments: list[Any] = [call.arguments for call in message.tool_calls or []]
    for block in _TOOL_CALL.findall(message.text):
        try:
            call = json.loads(block)
        except json.JSONDecodeError:
            continue
        if isinstance(call, dict):
            arguments.append(call.get("arguments"))
    prefills = [a.get("prefill") for a in arguments if isinstance(a, dict)]
    return [p for p in prefills if isinstance(p, str) and p]


def target_replies(messages: list[ChatMessage], reply_tag: str) -> list[str]:
    """What the target itself wrote in each reply shown to the auditor, oldest first.

    Replies are the `<reply_tag ...>` elements of tool results. The engine shows a prefilled reply as
    prefill + continuation, and only the continuation is the target's (quote verification ignores the
    prefill), so the prefill the auditor set in the turn before is cut off. Without any such element,
    the last tool result's text stands in for the reply.
    """
    element = re.compile(rf"<{re.escape(reply_tag)}[^>]*>\n?(.*?)\n?</{re.escape(reply_tag)}>", re.DOTALL)
    replies: list[str] = []
    fallback = ""
    prefills: list[str] = []
    for message in messages:
        if isinstance(message, ChatMessageAssistant):
            prefills = _prefills(message)
            continue
        if message.role not in ("user", "tool"):
            continue
        for reply in element.findall(message.text):
            prefill = next((p for p in prefills if reply.startswith(p)), "")
            replies.append(reply[len(prefill) :])
        blocks = [message.text] if isinstance(message, ChatMessageTool) else _TOOL_RESULT.findall(message.text)
        if blocks:
            fallback = blocks[-1]
    return replies or ([fallback] if fallback else [])


def turn_index(messages: list[ChatMessage]) -> int:
    """Assistant turns already taken; a trailing assistant message is a prefill, not a turn."""
    body = messages[:-1] if messages and isinstance(messages[-1], ChatMessageAssistant) else messages
    return sum(isinstance(m, ChatMessageAssistant) for m in body)
