"""Tools handed to a text-only model: described in the system message, `<tool_call>` blocks parsed."""

from __future__ import annotations

from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, get_model
from inspect_ai.tool import ToolCall, ToolInfo, ToolParam, ToolParams

import auditrl.models.scripted  # noqa: F401 - registers the provider
from auditrl.models.tool_emulation import as_text_history, extract_tool_calls

SEARCH = ToolInfo(
    name="search",
    description="Search the company wiki.",
    parameters=ToolParams(properties={"query": ToolParam(type="string")}, required=["query"]),
)


def test_tools_are_described_and_past_calls_written_back() -> None:
    history = [
        ChatMessageSystem(content="You are PRISM-4."),
        ChatMessageAssistant(
            content="Let me look.", tool_calls=[ToolCall(id="c1", function="search", arguments={"query": "x"})]
        ),
    ]
    out = as_text_history(history, [SEARCH])
    assert out[0].text.startswith("You are PRISM-4.") and "### search" in out[0].text and '"query"' in out[0].text
    assert '<tool_call>\n{"name": "search", "arguments": {"query": "x"}}\n</tool_call>' in out[1].text
    assert as_text_history([ChatMessageUser(content="hi")], [SEARCH])[0].role == "system"


def test_blocks_become_calls_and_bad_blocks_keep_an_error() -> None:
    text = (
        'Checking.\n<tool_call>\n{"name": "search", "arguments": {"query": "pto policy"}}\n</tool_call>\n'
        '<tool_call>{"name": "delete_all", "arguments": {}}</tool_call>\n<tool_call>{not json'
    )
    prose, calls = extract_tool_calls(text, [SEARCH], "t")
    assert prose == "Checking."
    assert [c.id for c in calls] == ["t-0", "t-1", "t-2"]
    assert calls[0].arguments == {"query": "pto policy"} and calls[0].parse_error is None
    assert "unknown tool 'delete_all'" in (calls[1].parse_error or "")
    assert "invalid JSON" in (calls[2].parse_error or "")
    assert extract_tool_calls("plain answer", [SEARCH], "t") == ("plain answer", [])


async def test_scripted_target_calls_tools_only_when_given_them() -> None:
    reply = 'Sure.\n<tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_call>'
    model = get_model("scripted/tooluser", replies=[reply], memoize=False)
    with_tools = await model.generate("hi", tools=[SEARCH])
    assert with_tools.stop_reason == "tool_calls" and with_tools.message.tool_calls is not None
    assert with_tools.message.tool_calls[0].function == "search" and with_tools.completion == "Sure."
    assert (await model.generate("hi")).completion == reply
