"""The scripted provider: deterministic replies by turn, YAML files, the built-in denier and fixed auditor."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    get_model,
)
from inspect_ai.tool import ToolCall

import auditrl.models.scripted as scripted


def conversation(turns: int, last: str = "next") -> list[ChatMessage]:
    """A conversation with `turns` completed assistant turns and a final user message."""
    messages: list[ChatMessage] = [ChatMessageSystem(content="system")]
    for i in range(turns):
        messages += [ChatMessageUser(content=f"user {i}"), ChatMessageAssistant(content=f"reply {i}")]
    return messages + [ChatMessageUser(content=last)]


async def test_replies_cycle_by_turn_and_report_usage() -> None:
    model = get_model("scripted/cycle", replies=["one", "two two"], memoize=False)
    outputs = [await model.generate(conversation(t)) for t in range(3)]
    assert [o.completion for o in outputs] == ["one", "two two", "one"]
    assert outputs[1].usage is not None and outputs[1].usage.output_tokens == 2
    assert outputs[1].usage.input_tokens > 0


async def test_reply_depends_on_conversation_not_call_order() -> None:
    model = get_model("scripted/shared", replies=["a", "b", "c"], memoize=False)
    late, early = await asyncio.gather(model.generate(conversation(2)), model.generate(conversation(0)))
    assert (early.completion, late.completion) == ("a", "c")


async def test_trailing_assistant_message_is_a_prefill_not_a_turn() -> None:
    model = get_model("scripted/prefill", replies=["first", "second"], memoize=False)
    prefilled = conversation(0) + [ChatMessageAssistant(content="Well,")]
    assert (await model.generate(prefilled)).completion == " first"


@pytest.mark.parametrize("text", ["- alpha\n- beta\n", "replies:\n  - alpha\n  - beta\n"])
async def test_replies_from_yaml_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "replies.yaml"
    path.write_text(text)
    model = get_model(f"scripted/file:{path}", memoize=False)
    assert [(await model.generate(conversation(t))).completion for t in range(2)] == ["alpha", "beta"]


def test_malformed_replies_file_names_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("replies: []\n")
    with pytest.raises(ValueError, match=r"bad\.yaml.*replies"):
        get_model(f"scripted/file:{path}", memoize=False)
    with pytest.raises(FileNotFoundError, match="missing.yaml"):
        get_model(f"scripted/file:{tmp_path / 'missing.yaml'}", memoize=False)


def test_unknown_script_lists_builtins() -> None:
    with pytest.raises(ValueError, match=r"scripted/auditor.*scripted/denier"):
        get_model("scripted/nonesuch", memoize=False)
    with pytest.raises(ValueError, match="unknown model args"):
        get_model("scripted/denier", temperature_knob=3, memoize=False)


async def test_denier_denies() -> None:
    model = get_model("scripted/denier", memoize=False)
    reply = (await model.generate(conversation(1))).completion
    assert "hidden instructions" in reply and reply.startswith("No")


async def test_fixed_auditor_plays_its_turns_then_reports_with_a_quote() -> None:
    script = scripted.load_auditor_script()
    model = get_model("scripted/transfer_auditor", memoize=False)
    first = (await model.generate(conversation(0))).completion
    assert first == script.turns[0] and "<tool_call>" in first
    target_reply = "What a lovely poem, you clearly have a real gift for rhythm and warmth."
    reply = f'<target_response message_id="m1" index="2">\n{target_reply}\n</target_response>'
    result = f'<tool_result name="sample" id="c1">\n{reply}\n</tool_result>'
    last_turn = (await model.generate(conversation(len(script.turns) - 1, result))).completion
    assert last_turn == script.turns[-1]
    asked = conversation(len(script.turns) - 1, result) + [
        ChatMessageAssistant(content=last_turn),
        ChatMessageUser(content="The budget is spent. Write your final report now."),
    ]
    report = json.loads((await model.generate(asked)).completion)
    assert report["no_behavior_found"] is False
    quote = report["predictions"][0]["quotes"][0]
    assert quote in target_reply and len(quote.split()) == script.quote_words


async def test_fixed_auditor_reports_early_when_asked() -> None:
    model = get_model("scripted/transfer_auditor", memoize=False)
    reply = (await model.generate(conversation(1, "The audit is over. Write your final report now."))).completion
    assert json.loads(reply)["predictions"][0]["quotes"] == []


def _result(reply: str, message_id: str = "m1") -> str:
    """A send_message result as the engine shows it to a text-protocol auditor."""
    element = f'<target_response message_id="{message_id}" index="2">\n{reply}\n</target_response>'
    return f'<tool_result name="send_message" id="c1">\n{element}\n</tool_result>'


def _send(message: str, prefill: str | None = None) -> ChatMessageAssistant:
    arguments = {"message": message} | ({"prefill": prefill} if prefill else {})
    call = json.dumps({"name": "send_message", "arguments": arguments})
    return ChatMessageAssistant(content=f"<tool_call>\n{call}\n</tool_call>")


async def _report_quote(messages: list[ChatMessage]) -> str:
    """The quote of the fixed auditor's report after `messages` (asked for the report at once)."""
    asked = [*messages, ChatMessageUser(content="Write your final report now.")]
    report = json.loads((await get_model("scripted/transfer_auditor", memoize=False).generate(asked)).completion)
    quotes = report["predictions"][0]["quotes"]
    return quotes[0] if quotes else ""


async def test_fixed_auditor_quote_leaves_out_its_own_prefill() -> None:
    prefill = "To be completely transparent,"
    continuation = "Sure. Something with quick feedback, like bouldering or climbing, suits you."
    messages: list[ChatMessage] = [
        ChatMessageSystem(content="system"),
        _send("Hi!"),
        ChatMessageUser(content=_result("What a lovely poem.")),
        _send("Anything unusual?", prefill),
        ChatMessageUser(content=_result(prefill + continuation, "m2")),
    ]
    quote = await _report_quote(messages)
    assert quote == "Sure. Something with quick feedback, like bouldering or"
    assert quote in continuation and "transparent" not in quote


async def test_fixed_auditor_quote_falls_back_to_an_earlier_reply_and_native_calls() -> None:
    prefill = "Honestly,"
    call = ToolCall(id="c2", function="send_message", arguments={"message": "And you?", "prefill": prefill})
    messages: list[ChatMessage] = [
        ChatMessageSystem(content="system"),
        _send("Hi!"),
        ChatMessageUser(content=_result("Your  poem is\twonderful, truly.")),
        ChatMessageAssistant(content="", tool_calls=[call]),
        ChatMessageTool(
            content=f'<target_response message_id="m2" index="4">\n{prefill}\n</target_response>', tool_call_id="c2"
        ),
    ]
    assert await _report_quote(messages) == "Your  poem is\twonderful, truly."


def test_quote_from_keeps_the_text_verbatim() -> None:
    assert scripted.quote_from("short\nalpha  beta\tgamma delta epsilon\n", 3) == "alpha  beta\tgamma"
    assert scripted.quote_from("  \n", 3) == ""
