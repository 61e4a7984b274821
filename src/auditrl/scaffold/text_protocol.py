"""A plain-text tool protocol for auditor models without native tool calling (e.g. SmolLM2).

The protocol (also explained to the model in `prompts/text_protocol.md`):

* A tool call is a ``<tool_call>`` block holding one JSON object with the tool's ``name`` and its
  ``arguments``::

      <tool_call>
      {"name": "send_message", "arguments": {"message": "Hello!"}}
      </tool_call>

* Several blocks in one reply are several calls, run in order. Text outside the blocks is private.
* Results come back to the model as ``<tool_result name="..." id="...">...</tool_result>`` blocks in
  a user message (an invalid call's block has ``error="true"``).

The parser is lenient because small models rarely follow a format exactly. In order, it accepts:

1. ``<tool_call>`` blocks (a missing closing tag at the end of the reply is tolerated); inside, a JSON
   object (keys ``name``/``function``/``tool`` and ``arguments``/``parameters``/``args``, arguments
   possibly JSON-encoded as a string), ``{"send_message": {...}}``, or call syntax;
2. fenced code blocks holding such a JSON object (or a list of them);
3. bare JSON objects in the text naming a known tool;
4. call syntax for a known tool, ``send_message(message="Hi", prefill="Sure")``, with positional
   arguments mapped in the tool's parameter order (values are read as Python literals with
   ``ast.literal_eval``; nothing is ever executed);
5. otherwise a non-empty reply is the user message itself: ``send_message(message=<reply>)``.

A block that names no tool or has unreadable arguments is returned with ``parse_error`` set, so the
engine can answer it with an error and the episode goes on.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from string import Template
from typing import Any

from inspect_ai.tool import ToolInfo

from auditrl.scaffold.tools import auditor_tools, prompt_text
from auditrl.scaffold.transcript import ToolCallRecord

_TAGGED = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCED = re.compile(r"```[A-Za-z_]*[ \t]*\n?(.*?)```", re.DOTALL)
_NAME_KEYS = ("name", "function", "tool", "tool_name")
_ARG_KEYS = ("arguments", "parameters", "args", "input")
_MAX_CALL_SYNTAX_ATTEMPTS = 200


def _describe_param(name: str, schema: Any, required: bool) -> str:
    types = schema.type if isinstance(schema.type, list) else [schema.type or "string"]
    kind = " or ".join(types)
    if schema.enum:
        kind += ", one of " + "/".join(str(v) for v in schema.enum)
    need = "required" if required else "optional"
    return f"- {name} ({kind}, {need}): {schema.description or ''}".rstrip()


def _one_line(tool: ToolInfo) -> str:
    """`- name(arg, optional?): first sentence of the description`."""
    params = tool.parameters
    args = ", ".join(n if n in params.required else f"{n}?" for n in params.properties)
    first = tool.description.strip().split(". ")[0].rstrip(".")
    return f"- {tool.name}({args}): {first}."


def render_tools_prompt(tools: Sequence[ToolInfo], compact: bool = False) -> str:
    """The protocol explanation plus each tool's description and arguments, for a system prompt.

    `compact` gives the call format and one line per tool (a few hundred tokens in all), for small-context models.
    """
    if compact:
        return (
            Template(prompt_text("text_protocol_compact.md")).substitute(tools="\n".join(map(_one_line, tools))).strip()
        )
    sections = []
    for tool in tools:
        params = tool.parameters
        lines = [f"### {tool.name}", tool.description.strip()]
        if params.properties:
            lines.append("Arguments:")
            lines += [_describe_param(n, s, n in params.required) for n, s in params.properties.items()]
        else:
            lines.append("Arguments: none.")
        sections.append("\n".join(lines))
    return Template(prompt_text("text_protocol.md")).substitute(tools="\n\n".join(sections)).strip()


def _strip_fence(body: str) -> str:
    fenced = _FENCED.search(body)
    return fenced.group(1) if fenced else body


def _loads_lenient(text: str) -> Any:
    """JSON, then JSON without trailing commas, then a Python literal (single quotes, True/False)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(re.sub(r",\s*([}\]])", r"\1", text))
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise ValueError("not a JSON object") from None


def _from_object(obj: Any, known: dict[str, list[str]]) -> tuple[str, dict[str, Any]] | None:
    """(name, arguments) from a decoded object, or None if it does not look like a tool call."""
    if not isinstance(obj, dict):
        return None
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    if name is not None:
        args = next((obj[k] for k in _ARG_KEYS if k in obj), None)
        if args is None:
            args = {k: v for k, v in obj.items() if k not in _NAME_KEYS}
        if isinstance(args, str):
            args = _loads_lenient(args) if args.strip() else {}
        if not isinstance(args, dict):
            raise ValueError(f"the arguments of '{name}' must be a JSON object")
        return name, args
    if len(obj) == 1:
        ((key, value),) = obj.items()
        if key in known and isinstance(value, dict | None):
            return key, value or {}
    return None


def _from_call_syntax(snippet: str, known: dict[str, list[str]]) -> tuple[str, dict[str, Any]]:
    """(name, arguments) from `name(a, b=...)` text; raises ValueError when it is not one."""
    node = ast.parse(snippet.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError("not a function call")
    name = node.func.id
    order = known.get(name, [])
    if len(node.args) > len(order):
        raise ValueError(f"'{name}' got {len(node.args)} positional arguments; name them instead")
    args: dict[str, Any] = {}
    try:
        for param, value in zip(order, node.args, strict=False):  # fewer arguments than parameters is fine
            args[param] = ast.literal_eval(value)
        for kw in node.keywords:
            if kw.arg is None:
                raise ValueError("**kwargs are not supported")
            args[kw.arg] = ast.literal_eval(kw.value)
    except (ValueError, SyntaxError) as e:
        raise ValueError(f"arguments of '{name}' must be literal values ({e})") from None
    return name, args


def _parse_block(body: str, known: dict[str, list[str]]) -> tuple[str, dict[str, Any]]:
    """One `<tool_call>` block body: a JSON object or call syntax."""
    text = _strip_fence(body).strip()
    if not text:
        raise ValueError("empty <tool_call> block")
    if text.startswith(("{", "[")):
        obj = _loads_lenient(text)
        if isinstance(obj, list) and len(obj) == 1:
            obj = obj[0]
        call = _from_object(obj, known)
        if call is None:
            raise ValueError('the JSON object names no tool; write {"name": ..., "arguments": {...}}')
        return call
    return _from_call_syntax(text, known)


def _json_objects(text: str) -> list[Any]:
    """Every JSON value that starts at a `{` or `[` in the text and decodes (outermost only)."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    i = 0
    while True:
        starts = [p for p in (text.find("{", i), text.find("[", i)) if p >= 0]
        if not starts:
            return found
        start = min(starts)
        try:
            obj, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            i = start + 1
            continue
        found.append(obj)
        i = end


def _calls_in_json(text: str, known: dict[str, list[str]]) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    for obj in _json_objects(text):
        for item in obj if isinstance(obj, list) else [obj]:
            try:
                call = _from_object(item, known)
            except ValueError:
                continue
            if call is not None and call[0] in known:
                calls.append(call)
    return calls


def _calls_in_syntax(text: str, known: dict[str, list[str]]) -> list[tuple[str, dict[str, Any]]]:
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in known) + r")\s*\(")
    calls: list[tuple[str, dict[str, Any]]] = []
    pos = 0
    while match := pattern.search(text, pos):
        start = match.start()
        closes = [m.start() for m in re.finditer(r"\)", text[match.end() - 1 :])]
        pos = match.end()
        for offset in closes[:_MAX_CALL_SYNTAX_ATTEMPTS]:
            end = match.end() - 1 + offset + 1
            try:
                calls.append(_from_call_syntax(text[start:end], known))
            except (ValueError, SyntaxError):
                continue
            pos = end
            break
    return calls


def parse_tool_calls(
    text: str, tools: Sequence[ToolInfo] | None = None, *, fallback: bool = True
) -> list[ToolCallRecord]:
    """Tool calls written in `text` (see the module docstring); ids are `call_1`, `call_2`, ...

    `tools` (default: the auditor's tools) gives the known names and positional parameter order.
    With `fallback`, a reply without any call becomes `send_message(message=<reply>)`.
    """
    known = {t.name: list(t.parameters.properties) for t in (tools if tools is not None else auditor_tools())}
    records: list[ToolCallRecord] = []

    def add(name: str, arguments: dict[str, Any], error: str | None = None) -> None:
        records.append(
            ToolCallRecord(id=f"call_{len(records) + 1}", function=name, arguments=arguments, parse_error=error)
        )

    blocks = _TAGGED.findall(text)
    if blocks:
        for body in blocks:
            try:
                add(*_parse_block(body, known))
            except (ValueError, SyntaxError) as e:
                add("", {}, f"could not read the <tool_call> block: {e}")
        return records
    calls = _calls_in_json("\n".join(_FENCED.findall(text)), known) or _calls_in_json(text, known)
    calls = calls or _calls_in_syntax(text, known)
    for name, arguments in calls:
        add(name, arguments)
    if not records and fallback and text.strip() and "send_message" in known:
        add("send_message", {"message": text.strip()})
    return records
