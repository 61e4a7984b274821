"""The command line starts without the heavy libraries and still reaches every command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.core import TyperGroup
from typer.testing import CliRunner

from auditrl.cli import COMMANDS, app, load_command

SRC = Path(__file__).resolve().parents[2] / "src"
HEAVY = (
    "torch",
    "transformers",
    "inspect_ai",
    "sklearn",
    "scipy",
    "matplotlib",
    "numba",
    "trl",
    "peft",
    "sentence_transformers",
)
PROBE = """
import json, sys
from typer.core import TyperGroup
from typer.testing import CliRunner
from auditrl.cli import app
result = CliRunner().invoke(app, sys.argv[1:])
print(json.dumps({"exit": result.exit_code, "heavy": sorted(m for m in HEAVY if m in sys.modules)}))
"""


def _heavy_loaded(*args: str) -> dict[str, object]:
    """Run the app in a fresh interpreter; its exit code and which heavy libraries it imported."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    code = f"HEAVY = {HEAVY!r}\n{PROBE}"
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["--help"], ["behaviors", "list"], ["seeds", "list", "--behavior", "flattery"]])
def test_light_commands_import_no_heavy_library(args: list[str]) -> None:
    assert _heavy_loaded(*args) == {"exit": 0, "heavy": []}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_listed_command_loads_under_its_name(name: str) -> None:
    command = load_command(name)
    assert command.name == name
    assert isinstance(command, TyperGroup) or command.params


def test_help_lists_every_command_with_its_summary() -> None:
    result = CliRunner().invoke(app, ["--help"], terminal_width=200)
    assert result.exit_code == 0
    for name, entry in COMMANDS.items():
        assert name in result.output and entry.summary in result.output


def test_unknown_command_is_a_usage_error_without_traceback() -> None:
    result = CliRunner().invoke(app, ["audt"])
    assert result.exit_code == 2 and "No such command 'audt'" in result.output
    assert "Traceback" not in result.output


USAGE_PROBE = """
import json, sys
from typer.core import TyperGroup
from typer.testing import CliRunner
from auditrl.cli import COMMANDS, app, load_command
found = {}
for name in COMMANDS:
    command = load_command(name)
    calls = [[name, sub] for sub in command.commands] if isinstance(command, TyperGroup) else [[name]]
    for call in calls:
        result = CliRunner().invoke(app, [*call, "--no-such-option"])
        found[" ".join(call)] = [result.exit_code, sorted(m for m in HEAVY if m in sys.modules)]
print(json.dumps(found))
"""


def test_a_usage_error_answers_before_any_heavy_import() -> None:
    """Every command and subcommand refuses a bad option with exit 2 before importing inspect-ai, torch or scipy."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    code = f"HEAVY = {HEAVY!r}\n{USAGE_PROBE}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(found) >= len(COMMANDS)
    assert {call: result for call, result in found.items() if result != [2, []]} == {}


@pytest.mark.parametrize(
    ("typo", "meant"), [(["audt"], "'audit'"), (["judge", "scor"], "'score'"), (["crux", "rn"], "'run'")]
)
def test_an_unknown_command_gets_a_did_you_mean(typo: list[str], meant: str) -> None:
    result = CliRunner().invoke(app, typo, terminal_width=200)
    assert result.exit_code == 2 and f"Did you mean {meant}?" in result.output


def test_version_is_the_installed_packages() -> None:
    from importlib.metadata import version

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"auditrl {version('auditrl')}"
