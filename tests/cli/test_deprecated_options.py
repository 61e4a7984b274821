"""Old option spellings still work, say what replaced them, and stay out of `--help`."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from typer.core import TyperGroup
from typer.testing import CliRunner

from auditrl.cli import app, load_command
from auditrl.cli.options import DEPRECATED_OPTIONS, DEPRECATED_VALUES, undeprecated


def options_of(command: str) -> set[str]:
    """Every option spelling `auditrl <command>` ("crux build") declares."""
    group, *sub = command.split()
    found: click.Command = load_command(group)
    if sub:
        assert isinstance(found, TyperGroup)
        found = found.commands[sub[0]]
    return {opt for p in found.params for opt in (*p.opts, *p.secondary_opts)}


@pytest.mark.parametrize("command", sorted(DEPRECATED_OPTIONS.keys() | DEPRECATED_VALUES.keys()))
def test_each_old_spelling_names_a_current_option_and_is_not_one(command: str) -> None:
    declared = options_of(command)
    for old, new in DEPRECATED_OPTIONS.get(command, {}).items():
        assert new in declared, f"{command}: {old} -> {new}, which the command does not take"
        assert old not in declared, f"{command}: {old} is still an option of its own"
    for option in DEPRECATED_VALUES.get(command, {}):
        assert option in declared


def test_old_spellings_are_rewritten_in_both_forms_with_one_warning_each() -> None:
    args, warnings = undeprecated(
        "suite", ["--cache=c.jsonl", "--planted-turns", "3", "--seed", "7", "--max-tokens", "9"]
    )
    assert args == ["--judge-cache=c.jsonl", "--max-turns", "3", "--random-seed", "7", "--max-tokens", "9"]
    assert len(warnings) == 3 and "use --judge-cache" in warnings[0] and "use --random-seed" in warnings[2]
    args, warnings = undeprecated("crux build", ["RUN", "--judge", "annotations", "--judge=annotations"])
    assert args == ["RUN", "--judge", "programmatic", "--judge=programmatic"] and len(warnings) == 2
    assert undeprecated("audit", ["--", "--seed", "x"]) == (["--", "--seed", "x"], [])
    args, warnings = undeprecated("audit", ["--seed-id", "a", "--seed", "b"])
    assert args == ["--seed-id", "a", "--seed-id", "b"] and len(warnings) == 1


def test_a_deprecated_alias_still_works_and_warns_on_stderr() -> None:
    runner = CliRunner()
    old = runner.invoke(app, ["seeds", "list", "--id", "flattery-02"], env={"COLUMNS": "200"})
    new = runner.invoke(app, ["seeds", "list", "--seed-id", "flattery-02"], env={"COLUMNS": "200"})
    assert old.exit_code == 0 and old.stdout == new.stdout and "1 seed(s)" in old.stdout
    assert "deprecated" in old.stderr and "--seed-id" in old.stderr and not new.stderr
    helped = runner.invoke(app, ["seeds", "list", "--help"], env={"COLUMNS": "200"})
    assert "--seed-id" in helped.stdout and "--id " not in helped.stdout


def test_an_old_offline_judge_name_still_builds_cruxes(tmp_path: Path) -> None:
    runner = CliRunner()
    run = tmp_path / "run"
    audited = runner.invoke(
        app,
        ["audit", "--auditor", "scripted/feedback_auditor", "--target", "sim/steady", "--behavior", "flattery",
         "--rollouts", "2", "--max-turns", "4", "--sampling-seed", "3", "--out", str(run)],
    )  # fmt: skip
    assert audited.exit_code == 0, audited.output
    assert "`auditrl audit --sampling-seed` is deprecated" in audited.stderr and "--random-seed" in audited.stderr
    built = runner.invoke(app, ["crux", "build", str(run), "--judge", "annotations", "--out", str(tmp_path / "crux")])
    assert built.exit_code == 0, built.output
    assert "--judge annotations` is deprecated" in built.stderr and "found by programmatic" in built.stdout
    assert (tmp_path / "crux" / "cruxes.jsonl").is_file()
