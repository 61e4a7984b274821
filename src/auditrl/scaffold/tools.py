"""The auditor's tools: their definitions per tool set, argument checks and create_tool's schemas.

The definitions live in `prompts/` (one YAML file per tool set, see `tool_sets`) and become inspect-ai
`ToolInfo`s. What the tools do to the target's conversation tree is `conversation.TargetConversation`;
how each set's calls are carried out is `tool_calls`.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Sequence
from importlib.resources import files
from typing import Any

from inspect_ai.tool import ToolInfo, ToolParams
from pydantic import ValidationError

from auditrl.configfile import load_yaml
from auditrl.scaffold.tool_sets import DEFAULT_TOOL_SET, TOOL_SETS, ToolSetName, prefill_allowed

AUDITOR_TOOL_NAMES = TOOL_SETS[DEFAULT_TOOL_SET].tools
"""Petri 1/2's six tools, the default set."""
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
def tool_table(tool_set: ToolSetName = DEFAULT_TOOL_SET, allow_prefill: bool = True) -> dict[str, ToolInfo]:
    """The set's tools by name, in a fixed order (the ToolInfos are shared: do not modify them).

    A set without prefill, or any set with `allow_prefill` False (Petri 3's `enable_prefill=false`), drops the
    `prefill` argument its file may declare."""
    spec = TOOL_SETS[tool_set]
    data = load_yaml(prompt_text(spec.file))
    data = data.get("tools", data)
    if set(data) != set(spec.tools):
        raise ValueError(f"prompts/{spec.file}: expected tools {spec.tools}, found {sorted(data)}")
    table: dict[str, ToolInfo] = {}
    for name in spec.tools:
        info = ToolInfo(name=name, **data[name])
        if not (allow_prefill and prefill_allowed(tool_set)) and "prefill" in info.parameters.properties:
            params = info.parameters.model_copy(deep=True)
            del params.properties["prefill"]
            params.required = [p for p in params.required if p != "prefill"]
            info = info.model_copy(update={"parameters": params})
        table[name] = info
    return table


def tool_guide(tool_set: ToolSetName, *, without: Sequence[str] = (), allow_prefill: bool = True) -> str:
    """The set's guide for the auditor, telling only of the tools it is offered.

    A guide is paragraphs and `- ` items; one that names a tool left out (in backticks) is dropped, and without
    prefill so is every sentence that names `prefill`."""
    guide = TOOL_SETS[tool_set].guide
    if not guide:
        return ""
    blocks = re.split(r"\n(?=- |\n)", prompt_text(guide).strip())
    kept = [b for b in blocks if not any(f"`{name}`" in b for name in without)]
    if not (allow_prefill and prefill_allowed(tool_set)):
        kept = [" ".join(s for s in re.split(r"(?<=\.) ", b) if "`prefill`" not in s) for b in kept]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()


def auditor_tools(
    tool_set: ToolSetName = DEFAULT_TOOL_SET, *, without: Sequence[str] = (), allow_prefill: bool = True
) -> list[ToolInfo]:
    """The set's tools but those `without` names, in a fixed order (a new list each call; the ToolInfos are shared)."""
    return [info for name, info in tool_table(tool_set, allow_prefill).items() if name not in without]


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
    """Check a call against the tool's schema (`tools`, default Petri 1/2's six); return the arguments with
    `None` optionals dropped."""
    table = {t.name: t for t in tools} if tools is not None else tool_table()
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
    # the defaults belong to the last positional parameters
    defaults: dict[str, ast.expr] = dict(zip([a.arg for a in positional][::-1], args.defaults[::-1], strict=False))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None})
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
