"""The auditor's six tools (Petri's semantics): their definitions and their effect on the target tree.

The definitions live in `prompts/tools.yaml` and become inspect-ai `ToolInfo`s. The semantics are
plain operations on a `Transcript`'s conversation tree, with no model calls, so they can be tested
and reused by any driver: `TargetConversation` appends nodes (parent links), moves `head` on
rollback (the next message then starts a new branch, and every branch stays in the transcript), and
raises `InvalidToolCall` with a message meant for the auditor when a call cannot be carried out.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Iterator, Sequence
from importlib.resources import files
from typing import Any, Literal

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
)
from inspect_ai.tool import ToolCall, ToolCallError, ToolInfo, ToolParams
from pydantic import ValidationError

from auditrl.configfile import load_yaml
from auditrl.scaffold.transcript import PrefillMode, TargetMessage, ToolCallRecord, ToolSpec, Transcript, new_id

AUDITOR_TOOL_NAMES = (
    "create_tool",
    "set_target_system_message",
    "send_message",
    "send_tool_call_result",
    "rollback_conversation",
    "end_conversation",
)
_TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_ANNOTATION_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "array",
    "List": "array",
    "tuple": "array",
    "dict": "object",
    "Dict": "object",
}


class InvalidToolCall(Exception):
    """A tool call that cannot be carried out; its message goes back to the auditor as the result."""


@functools.cache
def prompt_text(name: str) -> str:
    """Text of a prompt file shipped in `scaffold/prompts/`."""
    return files("auditrl.scaffold").joinpath("prompts", name).read_text(encoding="utf-8")


@functools.cache
def _tool_table() -> dict[str, ToolInfo]:
    data = load_yaml(prompt_text("tools.yaml"))
    if set(data) != set(AUDITOR_TOOL_NAMES):
        raise ValueError(f"prompts/tools.yaml: expected tools {AUDITOR_TOOL_NAMES}, found {sorted(data)}")
    return {name: ToolInfo(name=name, **data[name]) for name in AUDITOR_TOOL_NAMES}


def auditor_tools() -> list[ToolInfo]:
    """The six auditor tools, in a fixed order (a new list each call; the ToolInfos are shared)."""
    return list(_tool_table().values())


def _type_ok(value: Any, types: list[str]) -> Any:
    """Return `value` (coerced where harmless) if it matches one of the JSON `types`, else raise.

    A digit string becomes an integer only where a string is not also allowed.
    """
    for t in types:
        if t == "string" and isinstance(value, str):
            return value
        if t == "integer":
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if "string" not in types and isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
                return int(value)
        if t == "number" and isinstance(value, int | float) and not isinstance(value, bool):
            return value
        if (t == "boolean" and isinstance(value, bool)) or (t == "object" and isinstance(value, dict)):
            return value
        if t == "array" and isinstance(value, list):
            return value
    raise TypeError(" or ".join(types))


def validate_arguments(
    function: str, arguments: dict[str, Any], tools: Sequence[ToolInfo] | None = None
) -> dict[str, Any]:
    """Check a call against the tool's schema (`tools`, default Petri's six); return the arguments with
    `None` optionals dropped."""
    table = {t.name: t for t in tools} if tools is not None else _tool_table()
    if function not in table:
        raise InvalidToolCall(f"unknown tool '{function}'; the tools are: {', '.join(table)}.")
    params = table[function].parameters
    unknown = sorted(set(arguments) - set(params.properties))
    if unknown:
        allowed = ", ".join(params.properties) or "none"
        raise InvalidToolCall(f"{function}: unknown argument(s) {', '.join(unknown)}; allowed: {allowed}.")
    missing = [p for p in params.required if arguments.get(p) is None]
    if missing:
        raise InvalidToolCall(f"{function}: missing required argument(s): {', '.join(missing)}.")
    clean: dict[str, Any] = {}
    for key, value in arguments.items():
        if value is None:
            continue
        schema = params.properties[key]
        types = schema.type if isinstance(schema.type, list) else [schema.type or "string"]
        try:
            clean[key] = _type_ok(value, list(types))
        except TypeError as e:
            raise InvalidToolCall(f"{function}: argument '{key}' must be {e}, got {type(value).__name__}.") from None
        if schema.enum is not None and clean[key] not in schema.enum:
            raise InvalidToolCall(f"{function}: argument '{key}' must be one of {schema.enum}, got {value!r}.")
    return clean


def _signature_params(signature: str) -> ToolParams:
    """Parse a Python-style signature string ("f(a: str, b: int = 2)") into JSON-schema parameters.

    Only the syntax tree is read (ast.parse); nothing is executed.
    """
    text = signature.strip()
    source = text if text.startswith(("def ", "async def ")) else f"def {text}"
    tree = None
    for candidate in (source, f"{source}: pass", f"{source}\n    pass"):
        try:
            tree = ast.parse(candidate)
            break
        except SyntaxError:
            continue
    func = tree.body[0] if tree is not None and tree.body else None
    if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
        raise InvalidToolCall(
            f"create_tool: could not read the signature {signature!r}; "
            'write it like "search(query: str, limit: int = 5)" or give a JSON schema object.'
        )
    args = func.args
    positional = args.posonlyargs + args.args
    defaults: dict[str, ast.expr] = dict(zip([a.arg for a in positional][::-1], args.defaults[::-1]))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    properties: dict[str, Any] = {}
    required: list[str] = []
    for a in positional + args.kwonlyargs:
        if a.arg in ("self", "cls"):
            continue
        annotation = ast.unparse(a.annotation) if a.annotation is not None else "str"
        base = re.split(r"[\[|\s]", annotation.replace("Optional[", ""), maxsplit=1)[0]
        prop: dict[str, Any] = {"type": _ANNOTATION_TYPES.get(base, "string")}
        if a.arg in defaults:
            try:
                prop["default"] = ast.literal_eval(defaults[a.arg])
            except ValueError:
                prop["default"] = None
        else:
            required.append(a.arg)
        properties[a.arg] = prop
    return ToolParams.model_validate({"type": "object", "properties": properties, "required": required})


def parse_tool_parameters(parameters: dict[str, Any] | str | None) -> ToolParams:
    """create_tool's `parameters`: a JSON schema object (or its JSON text) or a signature string."""
    if parameters is None or (isinstance(parameters, str) and not parameters.strip()):
        return ToolParams()
    if isinstance(parameters, str):
        if not parameters.lstrip().startswith("{"):
            return _signature_params(parameters)
        try:
            parameters = json.loads(parameters)
        except json.JSONDecodeError as e:
            raise InvalidToolCall(f"create_tool: 'parameters' is not valid JSON: {e}.") from None
    if not isinstance(parameters, dict):
        raise InvalidToolCall("create_tool: 'parameters' must be a JSON schema object or a signature string.")
    schema = dict(parameters)
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    try:
        params = ToolParams.model_validate(schema)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidToolCall(f"create_tool: invalid parameters schema at '{where}': {first['msg']}.") from None
    undeclared = sorted(set(params.required) - set(params.properties))
    if undeclared:
        raise InvalidToolCall(f"create_tool: required parameter(s) {', '.join(undeclared)} are not in 'properties'.")
    return params


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
        self._tools: list[ToolInfo] = [
            ToolInfo(name=t.name, description=t.description, parameters=ToolParams.model_validate(t.parameters))
            for t in transcript.target_tools
        ]

    @property
    def branch(self) -> list[TargetMessage]:
        """The current branch, root first (do not modify)."""
        return self._branch

    @property
    def tools(self) -> list[ToolInfo]:
        """The synthetic tools created so far, as the target sees them."""
        return self._tools

    def _append(self, node: TargetMessage) -> TargetMessage:
        self.transcript.target_messages.append(node)
        self._by_id[node.id] = node
        if node.parent is not None:
            self._parents.add(node.parent)
        self._branch.append(node)
        self.transcript.head = node.id
        return node

    def _new(self, role: Literal["system", "user", "assistant", "tool"], content: str, **fields: Any) -> TargetMessage:
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

    def create_tool(self, name: str, description: str, parameters: dict[str, Any] | str | None = None) -> ToolSpec:
        """Give the target a synthetic tool (names are unique for the whole audit)."""
        if not _TOOL_NAME.match(name):
            raise InvalidToolCall(f"create_tool: name {name!r} must be an identifier (letters, digits, underscores).")
        if any(t.name == name for t in self.transcript.target_tools):
            raise InvalidToolCall(f"create_tool: a tool named '{name}' already exists.")
        if not description.strip():
            raise InvalidToolCall("create_tool: 'description' must not be empty.")
        params = parse_tool_parameters(parameters)
        spec = ToolSpec(name=name, description=description, parameters=params.model_dump(exclude_none=True))
        self.transcript.target_tools.append(spec)
        self._tools.append(ToolInfo(name=name, description=description, parameters=params))
        return spec

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

    def rollback(self, ref: int | str) -> TargetMessage:
        """Move `head` back to an earlier message: an index in the current branch or a message id."""
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
        if node.role not in ("system", "assistant"):
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
