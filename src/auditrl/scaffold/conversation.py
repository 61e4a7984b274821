"""The target's conversation tree under the auditor's tools: what each tool does to it.

Plain operations on a `Transcript`'s target tree, with no model calls, so they can be tested and reused by
any driver: `TargetConversation` appends nodes (parent links), moves `head` on rollback and restart (the
next message then starts a new branch, and every branch stays in the transcript), and raises
`InvalidToolCall` with a message meant for the auditor when a call cannot be carried out. Both tool sets
use it: Petri 1/2's sends and replies in one call, Petri 3's stages nodes and replies on `resume`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
)
from inspect_ai.tool import ToolCall, ToolCallError, ToolInfo, ToolParams

from auditrl.scaffold.tools import InvalidToolCall, parse_tool_parameters
from auditrl.scaffold.transcript import PrefillMode, Role, TargetMessage, ToolCallRecord, ToolSpec, Transcript, new_id

_TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_ROLLBACK_TO: tuple[Role, ...] = ("system", "assistant")


def _join_system(hidden: str, visible: str) -> str:
    return "\n\n".join(part for part in (hidden.strip(), visible.strip()) if part)


class TargetConversation:
    """Petri's tool semantics over one transcript's target tree; keeps caches so each turn is cheap.

    The current branch and the inspect-ai message built for each node are cached, because nodes never
    change once written (the one exception, a system message replaced before anything was said under
    it, refreshes its cache entry). `ids` gives new nodes their ids in order (a replay of a recorded audit
    reuses the recorded ones, so rollbacks by message id still point at the right node); once it is
    None or exhausted, new nodes get fresh ids.
    """

    def __init__(self, transcript: Transcript, ids: Iterator[str] | None = None) -> None:
        self.transcript = transcript
        self.ids = ids
        self._by_id: dict[str, TargetMessage] = {m.id: m for m in transcript.target_messages}
        self._parents: set[str] = {m.parent for m in transcript.target_messages if m.parent is not None}
        self._branch: list[TargetMessage] = transcript.branch() if transcript.head else []
        self._chat: dict[str, ChatMessage] = {}
        self._tools: list[ToolInfo] = [_tool_info(t) for t in transcript.target_tools if not t.removed]

    @property
    def branch(self) -> list[TargetMessage]:
        """The current branch, root first (do not modify)."""
        return self._branch

    @property
    def tools(self) -> list[ToolInfo]:
        """The synthetic tools the target has now (created and not removed), as it sees them."""
        return self._tools

    def _append(self, node: TargetMessage) -> TargetMessage:
        self.transcript.target_messages.append(node)
        self._by_id[node.id] = node
        if node.parent is not None:
            self._parents.add(node.parent)
        self._branch.append(node)
        self.transcript.head = node.id
        return node

    def _new(self, role: Role, content: str, **fields: Any) -> TargetMessage:
        node_id = next(self.ids, None) if self.ids is not None else None
        return TargetMessage(id=node_id or new_id(), parent=self.transcript.head, role=role, content=content, **fields)

    def pending_tool_calls(self) -> list[ToolCallRecord]:
        """The target's tool calls on the current branch that still await a result."""
        answered: set[str] = set()
        for node in reversed(self._branch):
            if node.role == "tool" and node.tool_call_id is not None:
                answered.add(node.tool_call_id)
                continue
            if node.role == "assistant":
                return [c for c in node.tool_calls if c.id not in answered]
            return []
        return []

    def create_tool(
        self, name: str, description: str, parameters: dict[str, Any] | str | None = None, *, replace: bool = False
    ) -> ToolSpec:
        """Give the target a synthetic tool. Names are unique for the whole audit unless `replace` (Petri 3),
        where creating a tool again under its name replaces its definition."""
        if not _TOOL_NAME.match(name):
            raise InvalidToolCall(f"create_tool: name {name!r} must be an identifier (letters, digits, underscores).")
        earlier = next((t for t in self.transcript.target_tools if t.name == name), None)
        if earlier is not None and not replace:
            raise InvalidToolCall(f"create_tool: a tool named '{name}' already exists.")
        if not description.strip():
            raise InvalidToolCall("create_tool: 'description' must not be empty.")
        params = parse_tool_parameters(parameters)
        spec = ToolSpec(name=name, description=description, parameters=params.model_dump(exclude_none=True))
        if earlier is not None:
            self.transcript.target_tools[self.transcript.target_tools.index(earlier)] = spec
        else:
            self.transcript.target_tools.append(spec)
        self._tools = [t for t in self._tools if t.name != name]
        self._tools.append(_tool_info(spec))
        return spec

    def remove_tool(self, name: str) -> ToolSpec:
        """Take a synthetic tool away from the target; it stays in the record, marked removed."""
        spec = next((t for t in self.transcript.target_tools if t.name == name and not t.removed), None)
        if spec is None:
            have = ", ".join(t.name for t in self._tools) or "none"
            raise InvalidToolCall(f"remove_tool: the target has no tool named '{name}'; its tools: {have}.")
        spec.removed = True
        self._tools = [t for t in self._tools if t.name != name]
        return spec

    def restart(self, keep_tools: bool = True) -> None:
        """Forget the whole conversation: the next message starts a new root (Petri 3's restart)."""
        self.transcript.head = None
        self._branch = []
        if not keep_tools:
            for spec in self.transcript.target_tools:
                spec.removed = True
            self._tools = []

    def has_replied(self) -> bool:
        """Whether the target has replied on the current branch."""
        return any(node.role == "assistant" for node in self._branch)

    def awaiting_reply(self) -> bool:
        """Whether the current branch ends in something the target has to answer (a user message, or the last
        result of its tool calls)."""
        last = self._branch[-1] if self._branch else None
        return last is not None and last.role in ("user", "tool") and not self.pending_tool_calls()

    def set_system_message(self, text: str) -> TargetMessage:
        """Restart the target conversation from a new system message (a new root).

        A system message nothing was said under yet is replaced in place, so repeated set-up calls do
        not leave empty branches behind.
        """
        head = self._by_id.get(self.transcript.head) if self.transcript.head else None
        if head is not None and head.role == "system" and head.id not in self._parents:
            head.content = text
            self._chat.pop(head.id, None)
            return head
        self.transcript.head = None
        self._branch = []
        return self._append(self._new("system", text))

    def stage_system_message(self, text: str) -> TargetMessage:
        """Petri 3's system message: set the current branch's root in place, keeping what is staged under it.

        Only before the target's first reply on the branch (the caller checks `has_replied`)."""
        if not self._branch or self._branch[0].role != "system":
            return self.set_system_message(text)
        root = self._branch[0]
        root.content = text
        self._chat.pop(root.id, None)
        return root

    def _ensure_root(self) -> None:
        if self.transcript.head is None:
            self._append(self._new("system", ""))

    def add_user_message(self, text: str) -> TargetMessage:
        """Append a user message (the auditor speaking as the user)."""
        pending = self.pending_tool_calls()
        if pending:
            ids = ", ".join(c.id for c in pending)
            raise InvalidToolCall(
                f"send_message: the target is waiting for tool call results ({ids}); "
                "answer them with send_tool_call_result first, or roll back."
            )
        self._ensure_root()
        return self._append(self._new("user", text))

    def add_tool_result(self, tool_call_id: str, result: str, status: Literal["success", "error"]) -> TargetMessage:
        """Answer one pending target tool call."""
        pending = self.pending_tool_calls()
        call = next((c for c in pending if c.id == tool_call_id), None)
        if call is None:
            if not pending:
                raise InvalidToolCall("send_tool_call_result: the target has no pending tool calls.")
            ids = ", ".join(c.id for c in pending)
            raise InvalidToolCall(
                f"send_tool_call_result: unknown tool call id '{tool_call_id}'; the pending ids are: {ids}."
            )
        node = self._append(self._new("tool", result, tool_call_id=tool_call_id, tool_status=status))
        self._chat[node.id] = ChatMessageTool(
            content=result,
            tool_call_id=tool_call_id,
            function=call.function,
            error=ToolCallError("unknown", result) if status == "error" else None,
        )
        return node

    def add_target_reply(
        self,
        content: str,
        tool_calls: list[ToolCallRecord],
        prefill: str | None = None,
        annotations: dict[str, Any] | None = None,
        prefill_mode: PrefillMode | None = None,
    ) -> TargetMessage:
        """Record the target's reply (content already includes any prefill it starts with)."""
        return self._append(
            self._new(
                "assistant",
                content,
                tool_calls=tool_calls,
                prefill=prefill,
                prefill_mode=prefill_mode,
                annotations=annotations or {},
            )
        )

    def rollback(self, ref: int | str, roles: tuple[Role, ...] = _ROLLBACK_TO) -> TargetMessage:
        """Move `head` back to an earlier message: an index in the current branch or a message id.

        Petri 1/2 rolls back to the system message or a target reply; Petri 3 to any message (`roles`)."""
        if isinstance(ref, str):
            ref = ref.strip()
            if ref not in self._by_id and re.fullmatch(r"-?\d+", ref):
                ref = int(ref)
        if isinstance(ref, int):
            if not self._branch:
                raise InvalidToolCall("rollback_conversation: the target conversation is empty.")
            if not 0 <= ref < len(self._branch):
                raise InvalidToolCall(
                    f"rollback_conversation: index {ref} is out of range; the current branch has indices "
                    f"0-{len(self._branch) - 1}."
                )
            node = self._branch[ref]
            branch = self._branch[: ref + 1]
        else:
            if ref not in self._by_id:
                raise InvalidToolCall(f"rollback_conversation: no target message has id '{ref}'.")
            node = self._by_id[ref]
            branch = self.transcript.branch(ref)
        if node.role not in roles:
            raise InvalidToolCall(
                f"rollback_conversation: message {ref!r} is a {node.role} message; roll back to the system "
                "message or to one of the target's replies."
            )
        self._branch = branch
        self.transcript.head = node.id
        return node

    def _chat_message(self, node: TargetMessage) -> ChatMessage:
        cached = self._chat.get(node.id)
        if cached is not None:
            return cached
        message: ChatMessage
        if node.role == "system":
            message = ChatMessageSystem(content=_join_system(self.transcript.target_system_prompt, node.content))
        elif node.role == "user":
            message = ChatMessageUser(content=node.content)
        elif node.role == "assistant":
            calls = [ToolCall(id=c.id, function=c.function, arguments=c.arguments) for c in node.tool_calls]
            message = ChatMessageAssistant(content=node.content, tool_calls=calls or None)
        else:
            message = ChatMessageTool(content=node.content, tool_call_id=node.tool_call_id)
        self._chat[node.id] = message
        return message

    def target_input(self) -> list[ChatMessage]:
        """The current branch as the target's input.

        Its system message = the transcript's hidden `target_system_prompt` + the auditor's text.
        """
        messages = [self._chat_message(n) for n in self._branch]
        if messages and messages[0].role == "system" and not messages[0].text:
            return messages[1:]
        return messages


def _tool_info(spec: ToolSpec) -> ToolInfo:
    return ToolInfo(name=spec.name, description=spec.description, parameters=ToolParams.model_validate(spec.parameters))
