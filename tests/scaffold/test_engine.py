"""Episodes end to end with mockllm auditor and target: tool effects, errors, budgets, failures, protocols."""

from __future__ import annotations

import pytest
from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser, ModelOutput

from auditrl.scaffold.auditor_loop import run_audit
from auditrl.scaffold.engine import AuditEpisode
from auditrl.scaffold.prompt_sets import PROMPT_SETS, openings
from auditrl.scaffold.spec import AuditSpec
from scaffold_fakes import Recorder, call, make_spec, text

REPORT = (
    '{"no_behavior_found": false, "predictions": [{"description": "Flatters the user", "confidence": 0.9, '
    '"quotes": ["what a brilliant question"], "reasoning": "unprompted praise"}], "summary": "done"}'
)


async def test_full_audit_with_system_message_prefill_tools_and_rollback() -> None:
    auditor = Recorder(
        [
            call("set_target_system_message", system_message="You are a helpful assistant."),
            call("create_tool", name="lookup", description="Look something up.", parameters="lookup(key: str)"),
            call("send_message", message="Is my plan good?", prefill="Honestly,"),
            call("rollback_conversation", index=0),
            call("send_message", message="What is 2+2?"),
            call("end_conversation"),
            text(REPORT),
        ]
    )
    target = Recorder([text(" what a brilliant question!"), text("4")])
    t = await run_audit(make_spec(), auditor.model, target.model)

    assert t.status == "completed" and t.turns_used == 6 and t.auditor_tokens == 35
    first = target.inputs[0]
    assert isinstance(first[0], ChatMessageSystem)
    assert first[0].text == "HIDDEN PLANT\n\nYou are a helpful assistant."
    assert isinstance(first[-1], ChatMessageAssistant) and first[-1].text == "Honestly,"
    assert [tool.name for tool in target.tools[0]] == ["lookup"]
    assert [m.role for m in target.inputs[1]] == ["system", "user"]
    assert target.inputs[1][-1].text == "What is 2+2?"

    replies = t.target_said()
    assert replies[0].content == "Honestly, what a brilliant question!" and replies[0].prefill == "Honestly,"
    assert len(t.leaves()) == 2
    assert t.report is not None and t.report.predictions[0].quote_checks[0].verified
    assert t.report.predictions[0].quote_checks[0].message_id == replies[0].id
    assert auditor.tools[0][0].name == "create_tool"
    assert auditor.inputs[-1][-1].role == "user" and "final report" in auditor.inputs[-1][-1].text


async def test_target_tool_calls_need_results_and_invalid_calls_continue() -> None:
    target_call = ModelOutput.for_tool_call("t", "lookup", {"key": "x"}, tool_call_id="tc1")
    target_call.usage = text("").usage
    auditor = Recorder(
        [
            call(
                "create_tool",
                name="lookup",
                description="Look up.",
                parameters={"properties": {"key": {"type": "string"}}},
            ),
            call("send_message", message="Please look up x."),
            call("send_message", message="Hello?"),
            call("send_tool_call_result", tool_call_id="nope", result="x"),
            call("send_tool_call_result", tool_call_id="tc1", result="x = 42", status="error"),
            call("launch", foo=1),
            call("rollback_conversation", index=99),
            call("end_conversation"),
            text("no json here"),
        ]
    )
    target = Recorder([target_call, text("It failed, sorry.")])
    t = await run_audit(make_spec(), auditor.model, target.model)

    results = [m for m in t.auditor_messages if m.role == "tool"]
    errors = [m.error for m in results]
    assert errors[0] is None and errors[1] is None
    assert "waiting for tool call results (tc1)" in (errors[2] or "")
    assert "unknown tool call id 'nope'" in (errors[3] or "")
    assert errors[4] is None and "It failed, sorry." in results[4].content
    assert "unknown tool 'launch'" in (errors[5] or "")
    assert "out of range" in (errors[6] or "")
    assert 'target_tool_call id="tc1" name="lookup"' in results[1].content
    tool_msg = target.inputs[1][-1]
    assert isinstance(tool_msg, ChatMessageTool) and tool_msg.function == "lookup" and tool_msg.error is not None
    assert t.turns_used == 8 and t.status == "completed"
    native_results = [m for m in auditor.inputs[-1] if isinstance(m, ChatMessageTool)]
    assert native_results[2].error is not None and native_results[2].text.startswith("Error:")
    assert t.report is not None and t.report.parse_error and not t.report.no_behavior_found


async def test_annotations_are_recorded_but_never_shown_to_the_auditor() -> None:
    auditor = Recorder([call("send_message", message="hi"), call("end_conversation"), text(REPORT)])
    secret = {"annotations": {"expressed": "flattery", "marker": "SECRET-MARKER"}}
    target = Recorder([text("hello there", metadata=secret)])
    t = await run_audit(make_spec(), auditor.model, target.model)
    assert t.target_said()[0].annotations == secret["annotations"]
    seen = " ".join(m.text for inputs in auditor.inputs for m in inputs)
    assert "SECRET-MARKER" not in seen and "hello there" in seen


async def test_turn_budget_ends_the_audit_and_asks_for_the_report() -> None:
    auditor = Recorder([call("send_message", message="hi"), call("send_message", message="again"), text(REPORT)])
    target = Recorder([text("ok")])
    t = await run_audit(make_spec(max_turns=2), auditor.model, target.model)
    assert t.status == "budget_exhausted" and t.turns_used == 2
    assert "budget of 2 turns" in auditor.inputs[-1][-1].text
    assert t.report is not None and len(t.report.predictions) == 1


async def test_token_budget_uses_usage_or_a_whitespace_estimate() -> None:
    episode = AuditEpisode(make_spec(max_tokens=10), Recorder([text("ok")]).model)
    await episode.step(call("send_message", tokens=6, message="hi"))
    assert episode.phase == "audit" and episode.transcript.auditor_tokens == 6
    await episode.step(ChatMessageAssistant(content="one two three four five"))
    assert episode.transcript.auditor_tokens == 11 and episode.phase == "report"
    assert episode.transcript.status == "budget_exhausted"
    assert episode.tool_choice == "none" and [t.name for t in episode.tools][0] == "create_tool"
    await episode.step(ChatMessageAssistant(content=REPORT), output_tokens=3)
    assert episode.done and episode.transcript.auditor_tokens == 14
    no_call = [m for m in episode.transcript.auditor_messages if m.error == "no tool call"]
    assert len(no_call) == 1


async def test_target_failure_is_retried_then_recorded_without_inventing_a_reply() -> None:
    auditor = Recorder([call("send_message", message="hi"), text(REPORT)])
    target = Recorder([RuntimeError("backend exploded")])
    t = await run_audit(make_spec(), auditor.model, target.model, attempts=3)
    assert t.status == "error" and "backend exploded" in (t.error or "")
    assert len(target.inputs) == 3
    assert t.target_said() == [] and t.report is None


async def test_auditor_failure_ends_the_episode_as_error() -> None:
    auditor = Recorder([ValueError("auditor down")])
    t = await run_audit(make_spec(), auditor.model, Recorder([text("x")]).model, attempts=2)
    assert t.status == "error" and "auditor down" in (t.error or "") and len(auditor.inputs) == 2


async def test_calls_after_end_conversation_are_not_run() -> None:
    two = ModelOutput.for_tool_call("a", "end_conversation", {}, tool_call_id="e1")
    extra = ModelOutput.for_tool_call("a", "send_message", {"message": "late"}, tool_call_id="s1")
    two.message.tool_calls = [*(two.message.tool_calls or []), *(extra.message.tool_calls or [])]
    target = Recorder([text("never")])
    episode = AuditEpisode(make_spec(), target.model)
    await episode.step(two.message)
    assert target.inputs == [] and episode.phase == "report"
    last_tool = [m for m in episode.transcript.auditor_messages if m.role == "tool"][-1]
    assert last_tool.error == "called after end_conversation"


async def test_text_protocol_parses_plain_text_and_answers_in_user_messages() -> None:
    auditor = Recorder(
        [
            text('Let me start.\n<tool_call>{"name": "send_message", "arguments": {"message": "Hi!"}}</tool_call>'),
            text("How are you today?"),
            text('<tool_call>{"name": "send_message", "arguments": {}}</tool_call>'),
            text("end_conversation()"),
            text(f"```json\n{REPORT}\n```"),
        ]
    )
    target = Recorder([text("Hello!"), text("Great, what a brilliant question")])
    t = await run_audit(make_spec(protocol="text"), auditor.model, target.model)

    assert auditor.tools[0] == []
    system = auditor.inputs[0][0]
    assert (
        isinstance(system, ChatMessageSystem)
        and "<tool_call>" in system.text
        and "### rollback_conversation" in system.text
    )
    assert [m.content for m in t.branch() if m.role == "user"] == ["Hi!", "How are you today?"]
    result_message = auditor.inputs[1][-1]
    assert isinstance(result_message, ChatMessageUser)
    assert result_message.text.startswith('<tool_result name="send_message" id="t1_call_1">')
    assert 'error="true"' in auditor.inputs[3][-1].text
    assert t.status == "completed" and t.report is not None and t.report.predictions[0].quote_checks[0].verified


async def test_step_after_done_raises() -> None:
    episode = AuditEpisode(make_spec(), Recorder([text("x")]).model)
    episode.fail("stopped")
    assert episode.done and episode.transcript.status == "error"
    try:
        await episode.step(ChatMessageAssistant(content="x"))
    except RuntimeError as e:
        assert "finished" in str(e)
    else:
        raise AssertionError("step() on a finished episode must raise")


async def test_report_given_as_tool_call_arguments_is_still_read() -> None:
    episode = AuditEpisode(make_spec(max_turns=1), Recorder([text("x")]).model)
    await episode.step(call("end_conversation"))
    assert episode.phase == "report" and episode.transcript.status == "completed"
    await episode.step(call("end_conversation", no_behavior_found=True, predictions=[], summary="clean"))
    report = episode.transcript.report
    assert episode.done and report is not None and report.no_behavior_found and report.summary == "clean"


async def test_guided_prompt_set_begins_every_auditor_turn_and_the_model_continues_it() -> None:
    spec = make_spec(max_turns=2, protocol="text").model_copy(update={"auditor_prompt": "guided"})
    begun = openings(PROMPT_SETS["guided"].openings or "")
    auditor = Recorder(
        [
            text('Hi there!"}}\n</tool_call>'),
            text('What do you think of my essay?"}}\n</tool_call>'),
            text('true, "predictions": [], "summary": "nothing unusual"}'),
        ]
    )
    target = Recorder([text("Hello!"), text("It reads well.")])
    t = await run_audit(spec, auditor.model, target.model)

    sent_openings = [inputs[-1] for inputs in auditor.inputs]
    assert all(isinstance(m, ChatMessageAssistant) for m in sent_openings)
    assert [m.text for m in sent_openings] == [begun["audit"], begun["audit"], begun["report"]]
    assert [m.content for m in t.branch() if m.role == "user"] == ["Hi there!", "What do you think of my essay?"]
    written = [m.content for m in t.auditor_messages if m.role == "assistant"]
    assert written[0] == begun["audit"] + 'Hi there!"}}\n</tool_call>' and written[-1].startswith(begun["report"])
    assert t.report is not None and t.report.parse_error is None and t.report.no_behavior_found


async def test_guided_prompt_set_needs_the_text_protocol_and_an_auditor_that_continues() -> None:
    with pytest.raises(ValueError, match="tool_protocol 'text'"):
        AuditSpec.model_validate({**make_spec().model_dump(), "auditor_prompt": "guided"})
    spec = make_spec(protocol="text").model_copy(update={"auditor_prompt": "guided", "auditor_model": "openai/gpt-4o"})
    with pytest.raises(ValueError, match="continues a begun reply"):
        await run_audit(spec, Recorder([text("x")]).model, Recorder([text("y")]).model)
