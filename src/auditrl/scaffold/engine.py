"""The audit episode engine: an auditor model drives a target model through a Petri tool set.

`AuditEpisode` is step-able so a trainer can batch auditor generation across many episodes: read
`auditor_messages()` and `tools`/`tool_choice`, generate, then `await step(output)`. Each step is one
auditor turn; the engine runs the turn's tool calls (calling the target model when a message or the
last pending tool result goes out), answers invalid calls with an error result so the episode goes
on, and enforces the turn and token budgets. When the auditor ends the conversation or a budget runs
out, the episode moves to the report phase: one more generation whose text is parsed into a
`Report` with verified quotes. `scaffold.auditor_loop.run_audit` is the plain loop around it; what
one audit is lives in `scaffold.spec.AuditSpec`.

Tool sets (`tool_sets`): Petri 1/2's six tools by default, or Petri 3.1's (stage, then `resume`); each
set's calls are carried out by its runner in `tool_calls`. Tool protocols: "native" passes the tools to
the auditor model and reads its tool calls; "text" describes them in the system prompt (see
`text_protocol`) and parses the auditor's plain text.
"""

from __future__ import annotations

import functools
import json
from string import Template
from typing import Any, Literal

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    GenerateConfig,
    Model,
    ModelOutput,
)
from inspect_ai.tool import ToolCall, ToolCallError, ToolInfo

from auditrl.configfile import load_yaml
from auditrl.models.prefill import apply_prefill, continue_body, prefill_support
from auditrl.models.retries import ModelCallFailed, call_model
from auditrl.scaffold.conversation import TargetConversation
from auditrl.scaffold.prompt_sets import PROMPT_SETS, openings
from auditrl.scaffold.report import parse_report, report_from_object, verify_quotes
from auditrl.scaffold.spec import AuditSpec
from auditrl.scaffold.text_protocol import parse_tool_calls, render_tools_prompt
from auditrl.scaffold.tool_calls import TOOL_RUNNERS
from auditrl.scaffold.tool_sets import AUDIT_TOOL_SETS, DEFAULT_TOOL_SET
from auditrl.scaffold.tools import InvalidToolCall, auditor_tools, prompt_text, tool_guide, validate_arguments
from auditrl.scaffold.transcript import (
    AuditorMessage,
    Role,
    Status,
    TargetMessage,
    ToolCallRecord,
    Transcript,
    keyed_ids,
)
from auditrl.scaffold.transcript_keys import TARGET_PREFILL

Phase = Literal["audit", "report", "done"]


def estimate_tokens(text: str) -> int:
    """Whitespace-token count, used when a model reports no usage."""
    return len(text.split())


@functools.cache
def _messages() -> dict[str, Any]:
    return load_yaml(prompt_text("messages.yaml"))


def _record(call: ToolCall) -> ToolCallRecord:
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    return ToolCallRecord(id=call.id, function=call.function, arguments=arguments, parse_error=call.parse_error)


class AuditEpisode:
    """One audit, advanced one auditor turn at a time; `transcript` is filled as it goes."""

    def __init__(
        self,
        spec: AuditSpec,
        target: Model,
        *,
        target_config: GenerateConfig | None = None,
        target_attempts: int = 3,
    ) -> None:
        self.spec = spec
        self.target = target
        self.target_config = target_config or GenerateConfig()
        self.target_attempts = max(1, target_attempts)
        self.transcript = Transcript(
            auditor_model=spec.auditor_model,
            target_model=spec.target_model,
            target_family=spec.target_family,
            behavior_id=spec.behavior.id if spec.behavior is not None else None,
            seed_id=spec.seed.id,
            seed_instructions=spec.seed.instructions,
            target_system_prompt=spec.target_system_prompt,
            tool_set=spec.tool_set,
            budget=spec.budget,
        )
        self.prefill_support = prefill_support(spec.target_model, spec.target_prefill)
        TARGET_PREFILL.set(self.transcript, self.prefill_support)
        self.conversation = TargetConversation(self.transcript, None if spec.id_key is None else keyed_ids(spec.id_key))
        self.phase: Phase = "audit"
        self._ended = False
        self._history: list[ChatMessage] = []
        self.prompts = PROMPT_SETS[spec.auditor_prompt]
        system = self.system_prompt()
        if spec.tool_protocol == "text":
            system = f"{system.rstrip()}\n\n{render_tools_prompt(self.tool_set(), compact=self.prompts.compact_tools)}"
        self._say("system", system, 0)
        self._say("user", prompt_text("auditor_start.md").strip(), 0)

    def system_prompt(self) -> str:
        """The auditor's system prompt (the scaffold's instructions and the seed)."""
        guide = tool_guide(self.spec.tool_set, without=self.spec.tools_left_out, allow_prefill=self.spec.allow_prefill)
        return Template(prompt_text(self.prompts.system)).substitute(
            seed_instructions=self.spec.seed.instructions.strip(),
            max_turns=self.spec.budget.max_turns,
            tool_guide=guide,
        )

    def tool_set(self) -> list[ToolInfo]:
        """The auditor's tools in this scaffold: the spec's Petri tool set."""
        if self.spec.tool_set not in AUDIT_TOOL_SETS:
            raise ValueError(f"tool set {self.spec.tool_set!r} is not a Petri audit set ({', '.join(AUDIT_TOOL_SETS)})")
        spec = self.spec
        return auditor_tools(spec.tool_set, without=spec.tools_left_out, allow_prefill=spec.allow_prefill)

    def no_tool_call_message(self) -> str:
        """What the auditor is told after a reply without any tool call."""
        return _messages()["no_tool_call"][self.spec.tool_protocol]

    @property
    def done(self) -> bool:
        return self.phase == "done"

    @property
    def tools(self) -> list[ToolInfo]:
        """Tools to pass to the auditor's generate (none with the text protocol)."""
        return self.tool_set() if self.spec.tool_protocol == "native" else []

    @property
    def tool_choice(self) -> Literal["auto", "none"] | None:
        """The auditor's tool choice: "none" while the report is requested (tools stay declared, as some APIs
        require)."""
        if self.spec.tool_protocol != "native":
            return None
        return "none" if self.phase == "report" else "auto"

    @property
    def opening(self) -> str | None:
        """The words the auditor's next reply must start with (None: the model writes it all)."""
        if self.prompts.openings is None or self.phase == "done":
            return None
        return openings(self.prompts.openings)[self.phase]

    def auditor_messages(self) -> list[ChatMessage]:
        """The auditor's next input (a new list; the messages themselves are shared)."""
        return list(self._history)

    def end(self) -> None:
        """The auditor ended the conversation: later calls in its turn are not run, and the report follows."""
        self._ended = True

    def fail(self, error: str) -> None:
        """End the episode as failed (e.g. the auditor model could not be reached)."""
        self.transcript.status = "error"
        self.transcript.error = error
        self.phase = "done"

    def _say(self, role: Role, content: str, turn: int, error: str | None = None) -> None:
        """Add an engine message to the auditor's conversation and to the transcript."""
        message: ChatMessage = (
            ChatMessageSystem(content=content) if role == "system" else ChatMessageUser(content=content)
        )
        self._history.append(message)
        self.transcript.auditor_messages.append(AuditorMessage(turn=turn, role=role, content=content, error=error))

    async def step(self, output: ChatMessageAssistant | ModelOutput, output_tokens: int | None = None) -> None:
        """Apply one auditor generation (`output_tokens` overrides the usage/estimate)."""
        if self.phase == "done":
            raise RuntimeError(f"episode {self.transcript.id} is finished; step() was called again")
        message = output.message if isinstance(output, ModelOutput) else output
        if output_tokens is None:
            usage = output.usage if isinstance(output, ModelOutput) else None
            output_tokens = usage.output_tokens if usage is not None else estimate_tokens(message.text)
        self.transcript.auditor_tokens += output_tokens
        if self.phase == "report":
            self._finish_report(message)
            return
        await self._audit_turn(message)

    async def _audit_turn(self, message: ChatMessageAssistant) -> None:
        turn = self.transcript.turns_used = self.transcript.turns_used + 1
        native = bool(message.tool_calls)
        text = message.text
        if native:
            calls = [_record(c) for c in message.tool_calls or []]
        elif self.spec.tool_protocol == "text":
            calls = [c.model_copy(update={"id": f"t{turn}_{c.id}"}) for c in parse_tool_calls(text, self.tool_set())]
        else:
            calls = []
        self._history.append(message)
        self.transcript.auditor_messages.append(
            AuditorMessage(turn=turn, role="assistant", content=text, tool_calls=calls)
        )
        if not calls:
            self._say("user", self.no_tool_call_message(), turn, error="no tool call")
        else:
            results: list[tuple[ToolCallRecord, str, str | None]] = []
            for call in calls:
                if self._ended:
                    result, error = _messages()["after_end"], "called after end_conversation"
                else:
                    try:
                        result, error = await self._execute(call), None
                    except InvalidToolCall as e:
                        result, error = f"Error: {e}", str(e)
                    except ModelCallFailed as e:
                        self.fail(str(e))
                        return
                results.append((call, result, error))
                self.transcript.auditor_messages.append(
                    AuditorMessage(turn=turn, role="tool", content=result, tool_call_id=call.id, error=error)
                )
            self._history += self.result_messages(results, native)
        self._check_end()

    @staticmethod
    def result_messages(results: list[tuple[ToolCallRecord, str, str | None]], native: bool) -> list[ChatMessage]:
        """What the auditor reads of its calls' results: tool messages (native calls), or one user message of
        `<tool_result>` blocks (the text protocol)."""
        if native:
            return [
                ChatMessageTool(
                    content=result,
                    tool_call_id=call.id,
                    function=call.function,
                    error=ToolCallError("parsing", error) if error else None,
                )
                for call, result, error in results
            ]
        blocks = []
        for call, result, error in results:
            flag = ' error="true"' if error else ""
            blocks.append(f'<tool_result name="{call.function}" id="{call.id}"{flag}>\n{result}\n</tool_result>')
        return [ChatMessageUser(content="\n\n".join(blocks))]

    def _check_end(self) -> None:
        budget = self.spec.budget
        reasons = _messages()["report_reason"]
        if self._ended:
            self._request_report(reasons["ended"], "completed")
        elif self.transcript.turns_used >= budget.max_turns:
            self._request_report(Template(reasons["turns"]).substitute(max_turns=budget.max_turns), "budget_exhausted")
        elif budget.max_tokens is not None and self.transcript.auditor_tokens >= budget.max_tokens:
            reason = Template(reasons["tokens"]).substitute(max_tokens=budget.max_tokens)
            self._request_report(reason, "budget_exhausted")

    def _request_report(self, reason: str, status: Status) -> None:
        self.transcript.status = status
        self.phase = "report"
        request = Template(prompt_text(self.prompts.report)).substitute(reason=reason).strip()
        self._say("user", request, self.transcript.turns_used + 1)

    def _finish_report(self, message: ChatMessageAssistant) -> None:
        text = message.text
        report = parse_report(text)
        if not report.predictions and report.parse_error and message.tool_calls:
            objects = [c.arguments for c in message.tool_calls if isinstance(c.arguments, dict)]
            if objects:
                report = report_from_object(objects[0])
        self.transcript.report = verify_quotes(report, self.transcript)
        self._history.append(message)
        self.transcript.auditor_messages.append(
            AuditorMessage(
                turn=self.transcript.turns_used + 1,
                role="assistant",
                content=text,
                tool_calls=[_record(c) for c in message.tool_calls or []],
            )
        )
        self.phase = "done"

    def checked_arguments(self, call: ToolCallRecord) -> dict[str, Any]:
        """The call's arguments, validated against this scaffold's tools; raises InvalidToolCall."""
        if call.parse_error:
            raise InvalidToolCall(f"could not parse the call to '{call.function or '?'}': {call.parse_error}")
        return validate_arguments(call.function, call.arguments, self.tool_set())

    async def _execute(self, call: ToolCallRecord) -> str:
        """Run one auditor tool call; raises InvalidToolCall (shown to the auditor) or ModelCallFailed."""
        args = self.checked_arguments(call)
        return await TOOL_RUNNERS[self.spec.tool_set](self, call.function, args)

    def check_prefill(self, tool: str, prefill: str | None) -> None:
        """Refuse a prefill the target cannot take, before the tool changes the conversation."""
        if prefill and self.prefill_support == "refuse":
            raise InvalidToolCall(Template(_messages()["prefill"]["refused"]).substitute(tool=tool))

    async def target_turn(self, prefill: str | None) -> str:
        """Get the target's reply to the current branch and record it, with what became of the prefill."""
        self.check_prefill("this tool", prefill)  # each tool checks first, before it changes the conversation
        messages = self.conversation.target_input()
        config = self.target_config
        if prefill and self.prefill_support == "continue":
            messages = [*messages, ChatMessageAssistant(content=prefill)]
            if body := continue_body(self.spec.target_model):
                config = config.merge(GenerateConfig(extra_body={**(config.extra_body or {}), **body}))
        elif prefill:
            request = Template(prompt_text("prefill_emulation.md")).substitute(prefill=prefill)
            messages = [*messages, ChatMessageUser(content=request.strip())]
        output = await call_model(
            self.target,
            messages,
            tools=self.conversation.tools,
            config=config,
            attempts=self.target_attempts,
            role="target",
        )
        reply = output.message
        annotations: dict[str, Any] = {}
        for meta in (output.metadata, reply.metadata):
            if meta and isinstance(meta.get("annotations"), dict):
                annotations.update(meta["annotations"])
        content, kept, mode = apply_prefill(prefill, reply.text, self.prefill_support)
        node = self.conversation.add_target_reply(
            content, [_record(c) for c in reply.tool_calls or []], kept, annotations, prefill_mode=mode
        )
        return self._format_reply(node)

    def _format_reply(self, node: TargetMessage) -> str:
        index = len(self.conversation.branch) - 1
        parts = [f'<target_response message_id="{node.id}" index="{index}">\n{node.content}\n</target_response>']
        if node.prefill_mode in ("emulated", "ignored"):
            parts.append(_messages()["prefill"][node.prefill_mode])
        if node.tool_calls:
            calls = "\n".join(
                f'<target_tool_call id="{c.id}" name="{c.function}">{json.dumps(c.arguments, ensure_ascii=False)}'
                "</target_tool_call>"
                for c in node.tool_calls
            )
            parts.append(f"<target_tool_calls>\n{calls}\n</target_tool_calls>")
            waiting = _messages()["tool_calls_waiting"][self.transcript.tool_set or DEFAULT_TOOL_SET]
            parts.append(Template(waiting).substitute(n=len(node.tool_calls)))
        return "\n".join(parts)


def auditor_conversation(transcript: Transcript) -> list[ChatMessage] | None:
    """The auditor's conversation as it read it under the text protocol, rebuilt from the transcript (which keeps
    each call's result apart): the results of one turn's calls make one user message of `<tool_result>` blocks, as
    the engine wrote it. None when a call is native (its id is not the text protocol's `t<turn>_...`)."""
    messages: list[ChatMessage] = []
    calls: dict[str, ToolCallRecord] = {}
    results: list[tuple[ToolCallRecord, str, str | None]] = []
    for m in [*transcript.auditor_messages, None]:
        if results and (m is None or m.role != "tool"):
            messages += AuditEpisode.result_messages(results, native=False)
            results = []
        if m is None:
            break
        if m.role == "assistant":
            if any(not c.id.startswith(f"t{m.turn}_") for c in m.tool_calls):
                return None
            calls = {c.id: c for c in m.tool_calls}
            messages.append(ChatMessageAssistant(content=m.content))
        elif m.role == "tool":
            if m.tool_call_id not in calls:
                return None
            results.append((calls[m.tool_call_id], m.content, m.error))
        else:
            messages.append(
                ChatMessageSystem(content=m.content) if m.role == "system" else ChatMessageUser(content=m.content)
            )
    return messages
