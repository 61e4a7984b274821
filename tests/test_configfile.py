"""YAML written by people: aliases refused before they expand, non-finite numbers refused, values cut short."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from auditrl.configfile import ConfigFileError, ConfigModel, load_yaml, validation_problems
from auditrl.safe_text import short_repr

SRC = Path(__file__).resolve().parents[1] / "src" / "auditrl"
LAUGHS = "\n".join([f"{a}: &{a} [{', '.join([f'*{p}'] * 9)}]" for p, a in zip("abcdefgh", "bcdefghi", strict=True)])
BOMB = 'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + LAUGHS + "\nvalue: *i\n"


def test_an_alias_bomb_is_refused_at_once_naming_the_file_and_line() -> None:
    start = time.monotonic()
    with pytest.raises(ConfigFileError, match=r"bomb\.yaml: line 2, column \d+: .*aliases \(\*a\) are not allowed"):
        load_yaml(BOMB, "bomb.yaml")
    assert time.monotonic() - start < 1.0
    with pytest.raises(yaml.YAMLError):  # packaged files: PyYAML's own error
        load_yaml("a: &x 1\nb: *x\n")
    assert load_yaml("a: &x 1\nb: 2\n") == {"a": 1, "b": 2}  # an anchor alone expands nothing


class _Section(ConfigModel):
    rate: float = 0.1


@pytest.mark.parametrize("text", ["rate: .inf", "rate: -.inf", "rate: .nan"])
def test_config_models_require_finite_numbers(text: str) -> None:
    with pytest.raises(ValidationError) as info:
        _Section.model_validate(load_yaml(text))
    assert "field 'rate': Input should be a finite number" in validation_problems(info.value)


def test_values_are_cut_short_without_walking_them() -> None:
    nested: list[object] = ["x" * 10_000]
    for _ in range(200):
        nested = [nested] * 50
    start = time.monotonic()
    shown = short_repr(nested)
    assert len(shown) <= 60 and time.monotonic() - start < 0.1


def test_no_reader_loads_yaml_but_through_load_yaml() -> None:
    offenders = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if p.name != "configfile.py"
        and re.search(r"\byaml\.(safe_load|load|full_load|unsafe_load)\(", p.read_text(encoding="utf-8"))
    ]
    assert offenders == [], "read YAML with auditrl.configfile.load_yaml, which refuses aliases"
