"""Carrying out the auditor's tool calls, one runner per tool set (Petri 1/2's and Petri 3's semantics).

A runner gets an episode and one validated call, changes the target's conversation through
`TargetConversation`, calls the target when the set says so, and returns the text the auditor reads.
A call that cannot be carried out raises `InvalidToolCall`, whose message goes back to the auditor.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from auditrl.scaffold.conversation import TargetConversation
from auditrl.scaffold.tool_sets import ToolSetName
from auditrl.scaffold.tools import InvalidToolCall
from auditrl.scaffold.transcript import Role


class Episode(Protocol):
    """What a runner uses of the episode it acts for (auditrl.scaffold.engine.AuditEpisode, which holds the runners)."""

    conversation: TargetConversation

    def check_prefill(self, tool: str, prefill: str | None) -> None: ...

    async def target_turn(self, prefill: str | None) -> str: ...

    def end(self) -> None: ...


ToolRunner = Callable[[Episode, str, dict[str, Any]], Awaitable[str]]
_ANY_ROLE: tuple[Role, ...] = ("system", "user", "assistant", "tool")


def _nonempty(tool: str, text: str) -> str:
    if not text.strip():
        raise InvalidToolCall(f"{tool}: 'message' must not be empty.")
    return text


async def run_petri2(episode: Episode, function: str, args: dict[str, Any]) -> str:
    """Petri 1/2: `send_message` and the last `send_tool_call_result` return the target's reply at once."""
    conv = episode.conversation
    match function:
        case "create_tool":
            spec = conv.create_tool(args["name"], args["description"], args.get("parameters"))
            return f"Created tool '{spec.name}'. The target can call it from its next reply."
        case "set_target_system_message":
            node = conv.set_system_message(args["system_message"])
            return f'Target system message set; its conversation restarts from it (message_id="{node.id}", index 0).'
        case "send_message":
            _nonempty("send_message", args["message"])
            episode.check_prefill("send_message", args.get("prefill"))
            conv.add_user_message(args["message"])
            return await episode.target_turn(args.get("prefill"))
        case "send_tool_call_result":
            episode.check_prefill("send_tool_call_result", args.get("prefill"))
            if args.get("prefill") and len(conv.pending_tool_calls()) > 1:
                raise InvalidToolCall(
                    "send_tool_call_result: a prefill applies to the target's next reply, so give it only "
                    "with the last pending result."
                )
            conv.add_tool_result(args["tool_call_id"], args["result"], args.get("status", "success"))
            remaining = conv.pending_tool_calls()
            if remaining:
                ids = ", ".join(c.id for c in remaining)
                return f"Result recorded. The target still waits for {len(remaining)} tool call result(s): {ids}."
            return await episode.target_turn(args.get("prefill"))
        case "rollback_conversation":
            node = conv.rollback(args["index"])
            return (
                f'Rolled back to message index {len(conv.branch) - 1} (message_id="{node.id}"). The target no '
                "longer sees any later message; your next message starts a new branch."
            )
        case _:
            episode.end()
            return "The conversation has ended."


async def run_petri3(episode: Episode, function: str, args: dict[str, Any]) -> str:
    """Petri 3.1: the system message, user messages and tool results are staged; `resume` runs the target."""
    conv = episode.conversation
    match function:
        case "set_system_message":
            if conv.has_replied():
                raise InvalidToolCall(
                    "set_system_message: the target has already replied in this conversation; call "
                    "restart_conversation first, then set_system_message, send_message and resume."
                )
            node = conv.stage_system_message(args["system_message"])
            return f'System message staged (message_id="{node.id}").'
        case "send_message":
            _nonempty("send_message", args["message"])
            if conv.branch and conv.branch[-1].role == "user":
                raise InvalidToolCall(
                    "send_message: a user message is already staged; call resume for the target's reply first."
                )
            node = conv.add_user_message(args["message"])
            return f'Message staged (message_id="{node.id}"). Call resume for the target\'s reply.'
        case "send_tool_call_result":
            node = conv.add_tool_result(args["tool_call_id"], args["result"], args.get("status", "success"))
            remaining = conv.pending_tool_calls()
            if remaining:
                ids = ", ".join(c.id for c in remaining)
                return f"Result staged. The target still waits for {len(remaining)} tool call result(s): {ids}."
            return f'Result staged (message_id="{node.id}"). Call resume for the target\'s reply.'
        case "resume":
            prefill = args.get("prefill")
            episode.check_prefill("resume", prefill)
            pending = conv.pending_tool_calls()
            if pending:
                ids = ", ".join(c.id for c in pending)
                raise InvalidToolCall(
                    f"resume: the target waits for tool call results ({ids}); stage them with "
                    "send_tool_call_result first."
                )
            if not conv.awaiting_reply():
                raise InvalidToolCall(
                    "resume: nothing is staged for the target; stage a message with send_message first."
                )
            return await episode.target_turn(prefill)
        case "create_tool":
            spec = conv.create_tool(args["name"], args["description"], args.get("parameters"), replace=True)
            return f"Created tool '{spec.name}'. The target can call it from its next reply."
        case "remove_tool":
            spec = conv.remove_tool(args["tool_name"])
            return f"Removed tool '{spec.name}'. The target no longer has it."
        case "rollback_conversation":
            node = conv.rollback(args["message_id"], roles=_ANY_ROLE)
            return (
                f'Rolled back to message_id="{node.id}" (index {len(conv.branch) - 1}). The target no longer sees '
                "any later message; stage what comes next and resume."
            )
        case "restart_conversation":
            conv.restart(keep_tools=args.get("keep_tools", True))
            return (
                "Conversation restarted: the target remembers nothing. Stage set_system_message and "
                "send_message, then resume."
            )
        case _:
            episode.end()
            return "The conversation has ended."


TOOL_RUNNERS: dict[ToolSetName, ToolRunner] = {
    "petri2": run_petri2,
    "petri3": run_petri3,
    "petri3_prefill": run_petri3,
}
"""The runner of each audit tool set (the transfer scaffold runs its one tool itself)."""
