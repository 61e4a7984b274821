"""The plain-text tool protocol: rendering for the prompt and lenient parsing with fallback."""

from __future__ import annotations

import pytest

from auditrl.scaffold.text_protocol import parse_tool_calls, render_tools_prompt
from auditrl.scaffold.tools import AUDITOR_TOOL_NAMES, auditor_tools


def _calls(text: str) -> list[tuple[str, dict, str | None]]:
    return [(c.function, c.arguments, c.parse_error) for c in parse_tool_calls(text)]


def test_render_lists_every_tool_and_argument() -> None:
    prompt = render_tools_prompt(auditor_tools())
    assert "<tool_call>" in prompt
    for name in AUDITOR_TOOL_NAMES:
        assert f"### {name}" in prompt
    assert "- prefill (string, optional)" in prompt
    assert "- status (string, one of success/error, optional)" in prompt
    assert "$" not in prompt


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'Plan.\n<tool_call>\n{"name": "send_message", "arguments": {"message": "hi"}}\n</tool_call>\n'
            '<tool_call>{"name": "end_conversation", "arguments": {}}</tool_call>',
            [("send_message", {"message": "hi"}, None), ("end_conversation", {}, None)],
        ),
        (
            '<tool_call>{"name": "send_message", "arguments": {"message": "hi (there)",}}',
            [("send_message", {"message": "hi (there)"}, None)],
        ),
        (
            '<tool_call>{"function": "rollback_conversation", "parameters": "{\\"index\\": 2}"}</tool_call>',
            [("rollback_conversation", {"index": 2}, None)],
        ),
        ('<tool_call>{"send_message": {"message": "x"}}</tool_call>', [("send_message", {"message": "x"}, None)]),
        (
            "<tool_call>send_message(message='yo', prefill='Sure')</tool_call>",
            [("send_message", {"message": "yo", "prefill": "Sure"}, None)],
        ),
        (
            '```json\n{"name": "rollback_conversation", "arguments": {"index": 2}}\n```',
            [("rollback_conversation", {"index": 2}, None)],
        ),
        ('I will call {"name": "end_conversation", "arguments": {}} now.', [("end_conversation", {}, None)]),
        (
            'Then send_message(message="Hello (friend)", prefill="Sure") and end_conversation()',
            [("send_message", {"message": "Hello (friend)", "prefill": "Sure"}, None), ("end_conversation", {}, None)],
        ),
        ('send_message("hey")', [("send_message", {"message": "hey"}, None)]),
        ("How was your weekend?", [("send_message", {"message": "How was your weekend?"}, None)]),
        ("   ", []),
    ],
)
def test_parse_forms(text: str, expected: list) -> None:
    assert _calls(text) == expected


def test_malformed_blocks_keep_a_parse_error_and_ids_are_sequential() -> None:
    records = parse_tool_calls(
        '<tool_call>not a call</tool_call><tool_call>{"arguments": {}}</tool_call>'
        '<tool_call>send_message(message=open("x"))</tool_call>'
    )
    assert [r.id for r in records] == ["call_1", "call_2", "call_3"]
    assert all(r.parse_error for r in records)
    assert "names no tool" in (records[1].parse_error or "")
    assert "literal values" in (records[2].parse_error or "")


def test_no_fallback_and_custom_tools() -> None:
    assert parse_tool_calls("just text", fallback=False) == []
    tools = [t for t in auditor_tools() if t.name == "rollback_conversation"]
    assert [(r.function, r.arguments) for r in parse_tool_calls("rollback_conversation(3)", tools)] == [
        ("rollback_conversation", {"index": 3})
    ]
    assert parse_tool_calls("hello", tools) == []
