"""mkdocs hook: the pages generated from the code at build time, so they cannot drift from it.

A page holds a marker comment where generated text goes:

- `<!-- readme -->`: the repository's README, its links to `docs/...` made relative to the site;
- `<!-- cli-reference -->`: every `auditrl` command, its arguments and options, read from the typer app (the
  app is lazy, `auditrl.cli.COMMANDS`, so each command is loaded here as it would be when run);
- `<!-- cli-reference: module:attribute | how it is run -->`: the same for another typer app (a `typer.Typer`
  object), its commands shown after how it is run (default: the app's name), e.g.
  `<!-- cli-reference: pkg.cli:app | python -m pkg -->`;
- `<!-- config-reference: module:Class -->`: every field of a pydantic config model and of the models nested in
  it, with its type, default and description.
"""

from __future__ import annotations

import enum
import importlib
import json
import re
import types
import typing
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from typer.core import TyperGroup

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"<!--\s*(readme|cli-reference|config-reference)(?::\s*([\w.]+:\w+))?(?:\s*\|\s*([^>]*?))?\s*-->")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace each marker of the page with the text generated from the code."""

    def generate(found: re.Match[str]) -> str:
        kind, target, label = found.group(1), found.group(2), found.group(3)
        if kind == "readme":
            return readme()
        if kind == "cli-reference":
            return cli_reference(target, label)
        if target is None:
            raise ValueError(
                f"{page.file.src_path}: config-reference needs a model, e.g. <!-- config-reference: pkg.mod:Model -->"
            )
        return config_reference(load(target))

    return MARKER.sub(generate, markdown)


def load(target: str) -> Any:
    """The object named by `module:attribute`."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def readme() -> str:
    """The README below its title, with links into `docs/` made relative to the site's home page."""
    text = (ROOT / "README.md").read_text(encoding="utf-8").split("\n", 1)[1]
    return re.sub(r"\]\(docs/", "](", text)


def cell(text: str) -> str:
    """Text safe inside a markdown table cell: one line, pipes and angle brackets escaped outside code spans (inside
    them markdown shows every character as it is)."""
    parts = " ".join(str(text).split()).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code span, the backtick shown as itself
        parts = ["\\`".join(parts)]
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def code(text: str) -> str:
    """Text as inline code inside a table cell (a pipe inside a code span does not split the cell)."""
    text = " ".join(str(text).split()).replace("`", "")
    return f"`{text}`" if text else ""


def cli_reference(target: str | None, label: str | None = None) -> str:
    """Every command of the `auditrl` app, or of the typer app `target` names (run as `label`)."""
    if target is not None:
        command = typer.main.get_command(load(target))
        return render_command(command, label or command.name or target.rsplit(":", 1)[-1], 2)
    from auditrl.cli import COMMANDS, app, load_command

    root = typer.main.get_command(app)
    parts = [render_command(root, "auditrl", 2, subcommands=False)]
    for name in COMMANDS:
        parts.append(render_command(load_command(name), f"auditrl {name}", 2))
    return "\n".join(parts)


def render_command(command: Any, path: str, level: int, subcommands: bool = True) -> str:
    """One command's section: what it does, its usage, its parameters, then its subcommands one level down."""
    lines = [f"{'#' * level} `{path}`", ""]
    if command.help:
        lines += [typer_text(command.help), ""]
    context = typer.Context(command, info_name=path)
    usage = " ".join(command.collect_usage_pieces(context))
    lines += ["```text", f"{path} {usage}".rstrip(), "```", ""]
    lines += parameter_table(command, context)
    if subcommands and isinstance(command, TyperGroup):
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            if sub is not None and not sub.hidden:
                lines.append(render_command(sub, f"{path} {name}", min(level + 1, 6)))
    return "\n".join(lines)


def typer_text(text: str) -> str:
    """A docstring as typer shows it: rich markup removed, paragraphs kept."""
    text = re.sub(r"\[/?(?:bold|italic|dim|red|green|yellow|blue|cyan|magenta|underline)\]", "", text)
    return "\n\n".join(" ".join(p.split()) for p in text.split("\n\n"))


def parameter_table(command: Any, context: typer.Context) -> list[str]:
    """A table of the command's visible arguments and options (shell-completion options left out)."""
    rows = []
    for param in command.params:
        if getattr(param, "hidden", False) or param.name in ("help", "install_completion", "show_completion"):
            continue
        if param.param_type_name == "option":
            names = ", ".join(param.opts)
            if param.secondary_opts:
                names += " / " + ", ".join(param.secondary_opts)
            kind = "flag" if param.is_flag else param.display_type(context)
        else:
            names = (param.name or "").upper()
            kind = param.display_type(context)
        if param.multiple or param.nargs == -1:
            kind += ", repeatable"
        default = "required" if param.required else shown_default(param.default)
        rows.append(f"| {code(names)} | {code(kind)} | {default} | {cell(typer_text(param.help or ''))} |")
    if not rows:
        return []
    return ["| parameter | type | default | description |", "| --- | --- | --- | --- |", *rows, ""]


def shown_default(value: Any) -> str:
    """A default value as a table cell (none shown for an unset one)."""
    if value is None or value is PydanticUndefined or callable(value) or value == ():
        return ""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, (list, tuple)):
        return code(", ".join(str(v) for v in value))
    return code(str(value))


def type_name(annotation: Any) -> str:
    """A field's type, written as a reader of a YAML file needs it."""
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation)]
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) if isinstance(a, str) else str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin in (list, tuple, set, frozenset):
        inner = ", ".join(type_name(a) for a in args if a is not Ellipsis)
        return f"list[{inner}]" if inner else "list"
    if origin is dict:
        return f"dict[{', '.join(type_name(a) for a in args)}]" if args else "dict"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return annotation.__name__
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "Path": "path"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation).replace("typing.", "")


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's type holds (itself, a list's items, a union's members)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in models_in(a)]


def field_default(field: FieldInfo) -> str:
    """A field's default as a table cell: its value, its factory's value, or `required`."""
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "its fields' defaults"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, Path):
        value = str(value)
    try:
        return code(json.dumps(value))
    except TypeError:
        return code(str(value))


def config_reference(model: type[BaseModel]) -> str:
    """A section per model, the top one first, each nested model once, under the dotted path that reaches it."""
    sections: list[str] = []
    seen: set[type[BaseModel]] = set()
    queue: list[tuple[str, type[BaseModel]]] = [("", model)]
    while queue:
        path, current = queue.pop(0)
        if current in seen:
            continue
        seen.add(current)
        title = f"`{path}`: {current.__name__}" if path else current.__name__
        lines = [f"## {title}", ""]
        if current.__doc__:
            lines += [" ".join(current.__doc__.split()), ""]
        lines += ["| field | type | default | description |", "| --- | --- | --- | --- |"]
        for name, field in current.model_fields.items():
            if field.exclude:
                continue
            key = f"{path}.{name}" if path else name
            lines.append(
                f"| `{key}` | {code(type_name(field.annotation))} | {field_default(field)} | {cell(field.description or '')} |"
            )
            queue += [(key, nested) for nested in models_in(field.annotation)]
        sections.append("\n".join(lines) + "\n")
    return "\n".join(sections)
