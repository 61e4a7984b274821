"""Files people write (configs, behavior and seed files, dimension, marker and codebook files): YAML read
safely, validated by typed models, and every problem reported in one line naming the file and the field.

- Bounded: a file past its kind's size limit (auditrl.reading) or YAML nested deeper than YAML_DEPTH
  levels is refused, with the limit named, before it can fill memory or overflow the stack.
- YAML aliases (`*name`) are refused: a few lines of nested aliases ("billion laughs") expand to billions
  of nodes, and a loader, a validator or an error message that walks them hangs. None of auditrl's
  files needs them; anchors without aliases are harmless and allowed.
- A key written twice in one mapping is an error (PyYAML would keep the last silently). An unquoted
  `1e-5` is a number (as in YAML 1.2), a quoted `"2"` is a string.
- `ConfigModel` is the base of every config section: an unknown field is an error with a did-you-mean (a
  typo never passes silently), every number must be finite (`.inf` or `.nan` would train a policy to
  NaN), and a value is taken only as written: a bool or a quoted number is not a number, a number or a
  string is not a bool.
- Values are shown cut short (`auditrl.safe_text.short_repr`), however large the file made them.
"""

from __future__ import annotations

import difflib
import re
import types
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from auditrl.reading import CONFIG, FileKind, FileReadError, read_text
from auditrl.safe_text import short_repr

YAML_DEPTH = 64
"""How deep a YAML document may nest; auditrl's own files nest a handful of levels."""

RandomSeed = Annotated[int, Field(ge=0, lt=2**32, description="A random seed (0 <= seed < 2**32).")]
"""A seed of numpy's and torch's generators: numpy refuses negative ones."""

M = TypeVar("M", bound=BaseModel)


def _unwrapped(tp: Any) -> Any:
    """`tp` without `Annotated[...]` metadata."""
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    return tp


def _as_written(tp: Any, value: Any) -> str | None:
    """Why `value`, as the file wrote it, is not a `tp` without a conversion the user did not ask for (None: it
    is, or it is for pydantic to judge): a bool or a string for a number, a number or a string for a bool."""
    tp = _unwrapped(tp)
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        problems = [_as_written(member, value) for member in get_args(tp)]
        return None if None in problems else problems[0]
    if tp is type(None):
        return None if value is None else f"expected null, got {short_repr(value)}"
    if tp is bool:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            return None
        return f"expected true or false, got {short_repr(value)}"
    if tp in (int, float):
        if isinstance(value, bool):
            return f"a bool is not a number (got {value!r}); write the number"
        if isinstance(value, str):
            try:
                float(value)
            except ValueError:
                return None
            return f"a quoted number is not a number (got {short_repr(value)}); write it without quotes"
        return None
    if origin in (list, tuple, set, frozenset) and isinstance(value, list | tuple):
        args = [a for a in get_args(tp) if a is not Ellipsis]
        for i, item in enumerate(value):
            member = args[min(i, len(args) - 1)] if args else Any
            if (problem := _as_written(member, item)) is not None:
                return f"item {i}: {problem}"
    if origin is dict and isinstance(value, dict) and len(get_args(tp)) == 2:
        for key, item in value.items():
            if (problem := _as_written(get_args(tp)[1], item)) is not None:
                return f"{short_repr(key)}: {problem}"
    return None


class ConfigModel(BaseModel):
    """Base of every config section: extra fields are errors, numbers are finite, values are taken as written."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _taken_as_written(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        problems = []
        for name, field in cls.model_fields.items():
            key = field.alias if field.alias is not None and field.alias in data else name
            if key in data and (problem := _as_written(field.annotation, data[key])) is not None:
                error = PydanticCustomError("as_written", problem)
                problems.append(InitErrorDetails(type=error, loc=(key,), input=data[key]))
        if problems:
            raise ValidationError.from_exception_data(cls.__name__, problems)
        return data


class ConfigFileError(FileReadError):
    """A config file that cannot be read or validated; the message names the file and the field."""


_FLOAT_1_2 = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
"""A float in exponent form without a dot (`1e-5`), which YAML 1.2 reads as a number and PyYAML as a string."""


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing aliases before it composes them, nesting past YAML_DEPTH and duplicate
    keys, and reading `1e-5` as a number."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"YAML aliases (*{event.anchor}) are not allowed: write the value out", event.start_mark
            )
        if self._depth >= YAML_DEPTH:
            raise yaml.composer.ComposerError(
                None, None, f"nested deeper than {YAML_DEPTH} levels, the limit for YAML", self.peek_event().start_mark
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.construct_object(key_node)
            if key in seen:
                problem = f"key {short_repr(key)} is written twice (first on line {seen[key]})"
                raise yaml.constructor.ConstructorError(None, None, problem, key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_1_2, list("-+0123456789."))


def load_yaml(text: str, source: str | Path | None = None) -> Any:
    """`yaml.safe_load(text)`, bounded and strict (see the module). A problem raises yaml.YAMLError (with its
    line and column), or, when the text came from a user's file `source`, a ConfigFileError naming that file."""
    try:
        try:
            return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
        except (ValueError, OverflowError) as exc:  # a scalar no Python value holds: an int of 5000 digits, 2020-13-45
            raise yaml.YAMLError(f"a value cannot be read ({' '.join(str(exc).split())})") from exc
    except yaml.YAMLError as exc:
        if source is None:
            raise
        raise ConfigFileError(f"{source}: {yaml_problem(exc)}") from exc


def yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's message without its `in "<unicode string>"` lines: where (line, column) and what."""
    if isinstance(exc, yaml.reader.ReaderError):
        return f"character {exc.position + 1}: not valid YAML (character #x{exc.character:04x} is not allowed in YAML)"
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        what = "; ".join(str(part) for part in (exc.context, exc.problem) if part)
        return f"{where}not valid YAML ({what or exc.__class__.__name__})"
    return f"not valid YAML ({' '.join(str(exc).split())})"


def read_user_text(path: Path, kind: FileKind = CONFIG) -> str:
    """The UTF-8 text of a file a user wrote, bounded by `kind`'s size limit; a problem is a ConfigFileError."""
    try:
        return read_text(Path(path), kind)
    except FileReadError as exc:
        raise ConfigFileError(str(exc)) from None


def read_yaml_file(path: Path, kind: FileKind = CONFIG) -> Any:
    """The YAML value of a file a user wrote (bounded, strict); every problem is a ConfigFileError naming it."""
    return load_yaml(read_user_text(path, kind), path)


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """The parsed top-level mapping of a config file; syntax errors name the file, line and column."""
    path = Path(path)
    raw = read_yaml_file(path)
    if raw is None:
        raise ConfigFileError(f"{path}: the file is empty; expected a mapping of field: value")
    if not isinstance(raw, dict):
        raise ConfigFileError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    return raw


def _models_in(tp: Any) -> list[type[BaseModel]]:
    """The pydantic models a field of type `tp` may hold (through unions, lists and dict values)."""
    tp = _unwrapped(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    if get_origin(tp) is Literal:
        return []
    return [m for arg in get_args(tp) for m in _models_in(arg)]


def known_fields(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The field names a mapping at `loc` (a pydantic error location below `model`) may have."""
    models = [model]
    for part in loc:
        if not isinstance(part, str):
            continue
        fields = [parent.model_fields[part] for parent in models if part in parent.model_fields]
        inner = [m for f in fields for m in _models_in(f.annotation)]
        models = inner or models  # a union's tag or a dict's key names no field: stay with the models found
    return sorted({name for m in models for name in m.model_fields})


def validation_problems(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """Pydantic's errors on one line: `field 'a.b': message (got value)`, joined by '; '. With the `model`
    validated, an unknown field gets a did-you-mean from the fields allowed where it stands."""
    problems = []
    for err in exc.errors():
        msg = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if err["type"] == "extra_forbidden":
            name = str(err["loc"][-1]) if err["loc"] else ""
            known = known_fields(model, tuple(err["loc"][:-1])) if model is not None else []
            msg = f"unknown field{did_you_mean(name, known) or (' (known: ' + ', '.join(known) + ')' if known else '')}"
        elif err["type"] not in ("missing", "value_error", "assertion_error", "as_written"):
            msg += f" (got {short_repr(err.get('input'))})"
        loc = ".".join(str(p) for p in err["loc"])
        problems.append(f"field '{loc}': {msg}" if loc else msg)
    return " ".join("; ".join(problems).split())


def validate_file(model: type[M], raw: Any, path: Path | str) -> M:
    """`model.model_validate(raw)`, with every problem reported as one ConfigFileError naming the file."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigFileError(f"{path}: {validation_problems(exc, model)}") from exc


def load_package_data(model: type[M], package: str, name: str) -> M:
    """A data file shipped inside `package` (a codebook, a vocabulary, a script), validated into `model`; a
    problem names the file and the field."""
    source = f"{package}/{name}"
    return validate_file(
        model, load_yaml(resources.files(package).joinpath(name).read_text(encoding="utf-8"), source), source
    )


def did_you_mean(value: str, choices: list[str]) -> str:
    """A hint naming the closest valid choice, for errors about a misspelt name (empty when none is close)."""
    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def read_kind(path: Path) -> str:
    """The `kind:` of a config file, so the CLI can dispatch before importing a trainer or validating the rest."""
    raw = read_yaml_mapping(path)
    kind = raw.get("kind")
    if not isinstance(kind, str):
        raise ConfigFileError(f"{path}: field 'kind' is missing or not a string (got {kind!r})")
    return kind
