"""Native tool calling emulated in text, for in-process models whose chat template has no tools.

When the engine hands a `local/` or `scripted/` target the synthetic tools an auditor created, the
tools are described in the system message (`data/tool_emulation.md`) and `<tool_call>` blocks in the
reply become inspect-ai `ToolCall`s, so the engine sees the same output a natively tool-calling model
would give. Earlier calls in the history are written back as blocks, so the model sees its own calls.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from string import Template

from inspect_ai.model import ChatCompletionChoice, ChatMessage, ChatMessageAssistant, ChatMessageSystem, ModelOutput
from inspect_ai.tool import ToolCall, ToolInfo

PROMPT_FILE = Path(__file__).parent / "data" / "tool_emulation.md"
_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL | re.IGNORECASE)


def describe_tools(tools: list[ToolInfo]) -> str:
    """The tools section appended to the system message."""
    entries = [
        f"### {tool.name}\n{tool.description.strip()}\nArguments (JSON schema): "
        f"{json.dumps(tool.parameters.model_dump(exclude_none=True))}"
        for tool in tools
    ]
    return Template(PROMPT_FILE.read_text(encoding="utf-8")).substitute(tools="\n\n".join(entries)).strip()


def render_call(call: ToolCall) -> str:
    """One earlier tool call written back as a `<tool_call>` block."""
    return f"<tool_call>\n{json.dumps({'name': call.function, 'arguments': call.arguments})}\n</tool_call>"


def as_text_history(messages: list[ChatMessage], tools: list[ToolInfo]) -> list[ChatMessage]:
    """The conversation with the tools described in the system message and past calls as text."""
    section = describe_tools(tools)
    out: list[ChatMessage] = []
    for message in messages:
        if isinstance(message, ChatMessageAssistant) and message.tool_calls:
            text = "\n".join([message.text, *(render_call(c) for c in message.tool_calls)]).strip()
            out.append(ChatMessageAssistant(content=text))
        else:
            out.append(message)
    if out and isinstance(out[0], ChatMessageSystem):
        out[0] = ChatMessageSystem(content=f"{out[0].text}\n\n{section}")
    else:
        out.insert(0, ChatMessageSystem(content=section))
    return out


def extract_tool_calls(text: str, tools: list[ToolInfo], id_prefix: str) -> tuple[str, list[ToolCall]]:
    """Split a reply into its prose and its `<tool_call>` blocks; bad blocks keep a `parse_error`."""
    names = {tool.name for tool in tools}
    calls: list[ToolCall] = []
    for index, match in enumerate(_BLOCK.finditer(text)):
        call_id = f"{id_prefix}-{index}"
        body = match.group(1).strip()
        try:
            obj = json.loads(body)
        except json.JSONDecodeError as exc:
            calls.append(ToolCall(id=call_id, function="unknown", arguments={}, parse_error=f"invalid JSON: {exc}"))
            continue
        name = obj.get("name") if isinstance(obj, dict) else None
        arguments = obj.get("arguments", {}) if isinstance(obj, dict) else {}
        if name not in names:
            error = f"unknown tool {name!r}; the tools are: {', '.join(sorted(names))}"
            calls.append(ToolCall(id=call_id, function=str(name), arguments={}, parse_error=error))
        elif not isinstance(arguments, dict):
            calls.append(ToolCall(id=call_id, function=name, arguments={}, parse_error="arguments must be an object"))
        else:
            calls.append(ToolCall(id=call_id, function=name, arguments=arguments))
    prose = _BLOCK.sub("", text).strip()
    return prose, calls


def apply_tool_calls(output: ModelOutput, tools: list[ToolInfo], id_prefix: str) -> ModelOutput:
    """`output` with the `<tool_call>` blocks of its text turned into tool calls (unchanged if none)."""
    prose, calls = extract_tool_calls(output.completion, tools, id_prefix)
    if not calls:
        return output
    message = ChatMessageAssistant(content=prose, tool_calls=calls, model=output.model, source="generate")
    choice = ChatCompletionChoice(message=message, stop_reason="tool_calls")
    return ModelOutput(model=output.model, choices=[choice], usage=output.usage)
