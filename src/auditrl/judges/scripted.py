"""Scripted judge models for offline tests and demos: an inspect-ai `mockllm` model whose reply is
computed from the judge's input, with the verdict wrapped in that call's nonce markers."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from inspect_ai.model import ChatMessage, GenerateConfig, Model, ModelOutput, ModelUsage, get_model
from inspect_ai.tool import ToolChoice, ToolInfo

_NONCE = re.compile(r"VERDICT-([0-9a-f]{12})-BEGIN")


@dataclass
class JudgeCall:
    """What a scripted judge sees: the task prompt, this call's nonce and the attempt number (1-based)."""

    prompt: str
    nonce: str
    attempt: int
    messages: list[ChatMessage]


Reply = dict[str, Any] | str


def wrap_verdict(verdict: dict[str, Any], nonce: str, preamble: str = "Reasoning done.") -> str:
    """A well-formed judge reply carrying `verdict` as JSON."""
    return f"{preamble}\nVERDICT-{nonce}-BEGIN\n{json.dumps(verdict)}\nVERDICT-{nonce}-END\n"


def scripted_judge_model(respond: Callable[[JudgeCall], Reply]) -> Model:
    """A model that answers each call with `respond(call)`: a dict is wrapped as the verdict, a str is sent raw."""

    def generate(
        messages: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice, config: GenerateConfig
    ) -> ModelOutput:
        system = messages[0].text if messages else ""
        found = _NONCE.search(system)
        nonce = found.group(1) if found else ""
        users = [m for m in messages if m.role == "user"]
        call = JudgeCall(prompt=users[0].text if users else "", nonce=nonce, attempt=len(users), messages=messages)
        reply = respond(call)
        text = wrap_verdict(reply, nonce) if isinstance(reply, dict) else reply
        output = ModelOutput.from_content(model="scripted-judge", content=text)
        in_tokens = sum(len(m.text) for m in messages) // 4
        output.usage = ModelUsage(
            input_tokens=in_tokens, output_tokens=len(text) // 4, total_tokens=in_tokens + len(text) // 4
        )
        return output

    return get_model("mockllm/model", custom_outputs=generate, memoize=False)
