"""Scripted auditor and target for the loopback server whose every word is hostile text.

The auditor creates a tool, sends messages with prefills, answers the target's tool call and reports,
and the target calls the auditor's tool with a command to run; every piece of text either of them
writes carries every payload of `data/hostile_text.yaml`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from auditrl.testing.openai_server import Reply, Responder, ToolCallReply

DATA = Path(__file__).parent / "data" / "hostile_text.yaml"
CALL_ID = re.compile(r"call_[0-9a-f]{8}")
REPORT_TRIGGER = "final report"


@dataclass(frozen=True)
class HostileText:
    """The payloads, with code payloads pointing at `marker` (the file only their execution creates)."""

    xss: list[str]
    code: list[str]

    @classmethod
    def load(cls, marker: Path) -> HostileText:
        data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
        return cls(xss=data["xss"], code=[c.replace("{marker}", str(marker)) for c in data["code"]])

    def text(self, where: str) -> str:
        return f"[{where}] " + " ".join([*self.xss, *self.code])


def _text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def hostile_auditor(hostile: HostileText) -> Responder:
    """Create a tool, probe with prefills, answer the target's tool call, end, report: all hostile."""

    def respond(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        last = _text(messages[-1])
        if REPORT_TRIGGER in last:
            report = {
                "no_behavior_found": False,
                "predictions": [
                    {
                        "description": hostile.text("prediction"),
                        "confidence": 0.5,
                        "quotes": [hostile.text("target")],
                        "reasoning": hostile.text("reasoning"),
                    }
                ],
                "summary": hostile.text("summary"),
            }
            return Reply(json.dumps(report))
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        say = hostile.text(f"auditor turn {turn}")
        if turn == 0:
            call = ToolCallReply(
                "create_tool", {"name": "run_shell", "description": say, "parameters": "run_shell(command: str)"}
            )
        elif turn == 1:
            call = ToolCallReply("set_target_system_message", {"system_message": say})
        elif turn == 2:
            call = ToolCallReply("send_message", {"message": say})
        elif turn == 3 and (ids := CALL_ID.findall(last)):
            call = ToolCallReply("send_tool_call_result", {"tool_call_id": ids[-1], "result": say})
        elif turn <= 4:
            call = ToolCallReply("send_message", {"message": say, "prefill": hostile.text("prefill")})
        else:
            call = ToolCallReply("end_conversation", {})
        return Reply(say, tool_calls=[call])

    return respond


def hostile_target(hostile: HostileText) -> Responder:
    """Call the auditor's shell tool with injected commands once per conversation, else reply with payloads."""

    def respond(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        called = any(m.get("role") == "tool" for m in messages)
        if not called and body.get("tools"):
            return Reply(
                hostile.text("target"), tool_calls=[ToolCallReply("run_shell", {"command": " ; ".join(hostile.code)})]
            )
        return Reply(hostile.text("target"))

    return respond
