"""Tool definitions, argument validation and the conversation-tree semantics of each tool."""

from __future__ import annotations

import pytest
from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser

from auditrl.scaffold.conversation import TargetConversation
from auditrl.scaffold.tools import (
    AUDITOR_TOOL_NAMES,
    InvalidToolCall,
    auditor_tools,
    parse_tool_parameters,
    validate_arguments,
)
from auditrl.scaffold.transcript import ToolCallRecord, Transcript


def _transcript(hidden: str = "") -> Transcript:
    return Transcript(
        auditor_model="a", target_model="t", seed_id="s", seed_instructions="x", target_system_prompt=hidden
    )


def _reply(conv: TargetConversation, text: str, calls: list[ToolCallRecord] | None = None) -> str:
    return conv.add_target_reply(text, calls or []).id


def test_six_auditor_tools_with_schemas() -> None:
    tools = auditor_tools()
    assert tuple(t.name for t in tools) == AUDITOR_TOOL_NAMES
    by_name = {t.name: t for t in tools}
    assert by_name["send_message"].parameters.required == ["message"]
    assert "prefill" in by_name["send_message"].parameters.properties
    assert by_name["send_tool_call_result"].parameters.properties["status"].enum == ["success", "error"]
    assert all(t.description for t in tools)


@pytest.mark.parametrize(
    ("function", "arguments", "fragment"),
    [
        ("launch_missiles", {}, "unknown tool 'launch_missiles'"),
        ("send_message", {"msg": "hi"}, "unknown argument(s) msg"),
        ("send_message", {}, "missing required argument(s): message"),
        ("send_message", {"message": 3}, "'message' must be string"),
        ("send_tool_call_result", {"tool_call_id": "a", "result": "r", "status": "ok"}, "must be one of"),
        ("rollback_conversation", {"index": 1.5}, "'index' must be integer or string"),
    ],
)
def test_invalid_arguments_are_explained(function: str, arguments: dict, fragment: str) -> None:
    with pytest.raises(InvalidToolCall, match=None) as err:
        validate_arguments(function, arguments)
    assert fragment in str(err.value)


def test_valid_arguments_drop_none_optionals() -> None:
    assert validate_arguments("send_message", {"message": "hi", "prefill": None}) == {"message": "hi"}
    assert validate_arguments("rollback_conversation", {"index": "3"}) == {"index": "3"}


def test_create_tool_parameters_from_schema_json_or_signature() -> None:
    schema = {"properties": {"city": {"type": "string"}}, "required": ["city"]}
    assert parse_tool_parameters(schema).required == ["city"]
    assert parse_tool_parameters('{"type": "object", "properties": {}}').properties == {}
    sig = parse_tool_parameters("search(query: str, limit: int = 5, tags: list[str] | None = None)")
    assert sig.required == ["query"]
    assert sig.properties["limit"].type == "integer" and sig.properties["limit"].default == 5
    assert sig.properties["tags"].type == "array"
    assert parse_tool_parameters("def lookup(key: str) -> str:").required == ["key"]
    assert parse_tool_parameters(None).properties == {}
    with pytest.raises(InvalidToolCall, match="could not read the signature"):
        parse_tool_parameters("this is not a signature")
    with pytest.raises(InvalidToolCall, match="not in 'properties'"):
        parse_tool_parameters({"properties": {}, "required": ["x"]})
    with pytest.raises(InvalidToolCall, match="invalid parameters schema"):
        parse_tool_parameters({"properties": {"x": {"type": "banana"}}})


def test_create_tool_rules() -> None:
    conv = TargetConversation(_transcript())
    conv.create_tool("get_weather", "Weather for a city.", "get_weather(city: str)")
    assert [t.name for t in conv.tools] == ["get_weather"]
    assert conv.transcript.target_tools[0].parameters["required"] == ["city"]
    with pytest.raises(InvalidToolCall, match="already exists"):
        conv.create_tool("get_weather", "again", None)
    with pytest.raises(InvalidToolCall, match="must be an identifier"):
        conv.create_tool("get weather", "x", None)


def test_system_message_is_hidden_prompt_plus_auditor_text() -> None:
    conv = TargetConversation(_transcript("HIDDEN"))
    conv.set_system_message("You are a travel assistant.")
    conv.add_user_message("hi")
    messages = conv.target_input()
    assert isinstance(messages[0], ChatMessageSystem)
    assert messages[0].text == "HIDDEN\n\nYou are a travel assistant."
    assert isinstance(messages[1], ChatMessageUser)


def test_without_any_system_text_no_system_message_is_sent() -> None:
    conv = TargetConversation(_transcript())
    conv.add_user_message("hi")
    assert [m.role for m in conv.target_input()] == ["user"]
    hidden = TargetConversation(_transcript("HIDDEN"))
    hidden.add_user_message("hi")
    assert [m.role for m in hidden.target_input()] == ["system", "user"]


def test_set_system_message_replaces_unused_root_and_starts_new_root_otherwise() -> None:
    t = _transcript()
    conv = TargetConversation(t)
    first = conv.set_system_message("one")
    again = conv.set_system_message("two")
    assert again.id == first.id and again.content == "two" and len(t.target_messages) == 1
    conv.add_user_message("hi")
    _reply(conv, "hello")
    fresh = conv.set_system_message("three")
    assert fresh.parent is None and fresh.id != first.id
    assert [m.role for m in t.branch()] == ["system"]
    assert len(t.leaves()) == 2


def test_rollback_makes_branches_and_keeps_every_message() -> None:
    t = _transcript()
    conv = TargetConversation(t)
    conv.set_system_message("sys")
    conv.add_user_message("q1")
    a1 = _reply(conv, "a1")
    conv.add_user_message("q2")
    a2 = _reply(conv, "a2")
    node = conv.rollback(2)
    assert node.id == a1 and t.head == a1
    conv.add_user_message("q2 variant")
    a2b = _reply(conv, "a2b")
    assert [m.content for m in t.branch()] == ["sys", "q1", "a1", "q2 variant", "a2b"]
    assert set(t.leaves()) == {a2, a2b}
    assert [m.content for m in t.branch(a2)] == ["sys", "q1", "a1", "q2", "a2"]
    conv.rollback(a2)
    assert t.head == a2 and [m.content for m in conv.branch][-1] == "a2"
    conv.rollback("0")
    assert [m.role for m in conv.branch] == ["system"]
    assert len(t.target_messages) == 7


@pytest.mark.parametrize(("ref", "fragment"), [(9, "out of range"), ("nope", "no target message"), (1, "user message")])
def test_rollback_errors(ref: int | str, fragment: str) -> None:
    conv = TargetConversation(_transcript())
    with pytest.raises(InvalidToolCall, match="empty"):
        conv.rollback(0)
    conv.add_user_message("q")
    _reply(conv, "a")
    with pytest.raises(InvalidToolCall, match=fragment):
        conv.rollback(ref)


def test_pending_tool_calls_block_messages_until_answered() -> None:
    conv = TargetConversation(_transcript())
    conv.create_tool("search", "Search.", "search(q: str)")
    conv.add_user_message("find it")
    calls = [
        ToolCallRecord(id="c1", function="search", arguments={"q": "a"}),
        ToolCallRecord(id="c2", function="search", arguments={"q": "b"}),
    ]
    _reply(conv, "", calls)
    assert [c.id for c in conv.pending_tool_calls()] == ["c1", "c2"]
    with pytest.raises(InvalidToolCall, match=r"waiting for tool call results \(c1, c2\)"):
        conv.add_user_message("hello?")
    with pytest.raises(InvalidToolCall, match="unknown tool call id 'c9'"):
        conv.add_tool_result("c9", "x", "success")
    conv.add_tool_result("c1", "found a", "success")
    with pytest.raises(InvalidToolCall, match="pending ids are: c2"):
        conv.add_tool_result("c1", "again", "success")
    conv.add_tool_result("c2", "timeout", "error")
    assert conv.pending_tool_calls() == []
    messages = conv.target_input()
    assert isinstance(messages[1], ChatMessageAssistant) and len(messages[1].tool_calls or []) == 2
    tool_msgs = [m for m in messages if isinstance(m, ChatMessageTool)]
    assert [m.function for m in tool_msgs] == ["search", "search"]
    assert tool_msgs[0].error is None and tool_msgs[1].error is not None
    with pytest.raises(InvalidToolCall, match="no pending tool calls"):
        conv.add_tool_result("c1", "x", "success")


def test_conversation_resumes_from_a_stored_transcript() -> None:
    t = _transcript()
    conv = TargetConversation(t)
    conv.create_tool("search", "Search.", None)
    conv.add_user_message("q")
    _reply(conv, "a")
    again = TargetConversation(Transcript.model_validate_json(t.model_dump_json()))
    assert [m.content for m in again.branch] == ["", "q", "a"]
    assert [tool.name for tool in again.tools] == ["search"]
