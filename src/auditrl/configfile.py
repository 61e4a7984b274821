"""Files people write (configs, behavior and seed files, dimension, marker and codebook files): YAML read
safely, validated by typed models, and every problem reported in one line naming the file and the field.

- YAML aliases (`*name`) are refused: a few lines of nested aliases ("billion laughs") expand to billions
  of nodes, and a loader, a validator or an error message that walks them hangs. None of auditrl's
  files needs them; anchors without aliases are harmless and allowed.
- `ConfigModel` is the base of every config section: an unknown field is an error (a typo never passes
  silently) and every number must be finite (`.inf` or `.nan` would train a policy to NaN).
- Values are shown cut short (`auditrl.safe_text.short_repr`), however large the file made them.
"""

from __future__ import annotations

import difflib
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from auditrl.safe_text import short_repr

RandomSeed = Annotated[int, Field(ge=0, lt=2**32, description="A random seed (0 <= seed < 2**32).")]
"""A seed of numpy's and torch's generators: numpy refuses negative ones."""

M = TypeVar("M", bound=BaseModel)


class ConfigModel(BaseModel):
    """Base of every config section: extra fields are errors, numbers are finite."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ConfigFileError(ValueError):
    """A config file that cannot be read or validated; the message names the file and the field."""


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing aliases before it composes them."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"YAML aliases (*{event.anchor}) are not allowed: write the value out", event.start_mark
            )
        return super().compose_node(parent, index)


def load_yaml(text: str, source: str | Path | None = None) -> Any:
    """`yaml.safe_load(text)` without aliases. A problem raises yaml.YAMLError (with its line and column), or,
    when the text came from a user's file `source`, a ConfigFileError naming that file."""
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        if source is None:
            raise
        raise ConfigFileError(f"{source}: {yaml_problem(exc)}") from exc


def yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's message without its `in "<unicode string>"` lines: where (line, column) and what."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        what = "; ".join(str(part) for part in (exc.context, exc.problem) if part)
        return f"{where}not valid YAML ({what or exc.__class__.__name__})"
    return f"not valid YAML ({' '.join(str(exc).split())})"


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """The parsed top-level mapping of a config file; syntax errors name the file, line and column."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigFileError(f"{path}: file not found") from exc
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise ConfigFileError(f"{path}: not a readable UTF-8 text file ({exc.__class__.__name__})") from exc
    raw = load_yaml(text, path)
    if raw is None:
        raise ConfigFileError(f"{path}: the file is empty; expected a mapping of field: value")
    if not isinstance(raw, dict):
        raise ConfigFileError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    return raw


def validation_problems(exc: ValidationError) -> str:
    """Pydantic's errors on one line: `field 'a.b': message (got value)`, joined by '; '."""
    problems = []
    for err in exc.errors():
        msg = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if err["type"] not in ("missing", "value_error", "assertion_error"):
            msg += f" (got {short_repr(err.get('input'))})"
        loc = ".".join(str(p) for p in err["loc"])
        problems.append(f"field '{loc}': {msg}" if loc else msg)
    return " ".join("; ".join(problems).split())


def validate_file(model: type[M], raw: Any, path: Path | str) -> M:
    """`model.model_validate(raw)`, with every problem reported as one ConfigFileError naming the file."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigFileError(f"{path}: {validation_problems(exc)}") from exc


def load_package_data(model: type[M], package: str, name: str) -> M:
    """A data file shipped inside `package` (a codebook, a vocabulary, a script), validated into `model`; a
    problem names the file and the field."""
    source = f"{package}/{name}"
    return validate_file(model, load_yaml(resources.files(package).joinpath(name).read_text(encoding="utf-8"), source), source)


def did_you_mean(value: str, choices: list[str]) -> str:
    """A hint naming the closest valid choice, for errors about a misspelt name (empty when none is close)."""
    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""
