"""Readable at 80 columns: tables keep ids and names whole (other columns wrap) and `--help` never cuts an option
name, with long commands grouping their options into panels."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from rich.console import Console
from typer.core import TyperGroup
from typer.testing import CliRunner

from auditrl.cli import COMMANDS, app, load_command
from auditrl.cli.crux import table as crux_table
from auditrl.cli.options import LONG_COMMAND_OPTIONS
from auditrl.evaluate.crux import CruxRow
from auditrl.stats import Estimate

CUT_NAME = re.compile(r"--[\w-]*…")


def _calls() -> list[list[str]]:
    calls = []
    for name in COMMANDS:
        command = load_command(name)
        calls += [[name, sub] for sub in command.commands] if isinstance(command, TyperGroup) else [[name]]
    return calls


@pytest.mark.parametrize("call", _calls(), ids=" ".join)
def test_help_never_cuts_an_option_name_at_80_columns(call: list[str]) -> None:
    result = CliRunner().invoke(app, [*call, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    assert not CUT_NAME.findall(result.output), result.output
    assert max(map(len, result.output.splitlines())) <= 80
    options = sum(1 for line in result.output.splitlines() if re.match(r"│ (\*  )?\s*--", line))
    if options > LONG_COMMAND_OPTIONS:
        assert len(re.findall(r"╭─ \w", result.output)) > 1, "a long command groups its options"


def test_seeds_list_keeps_ids_and_behaviors_whole_at_80_columns() -> None:
    result = CliRunner().invoke(app, ["seeds", "list", "--behavior", "flattery"], terminal_width=80)
    assert result.exit_code == 0
    rows = [line for line in result.output.splitlines() if line.startswith("│ flattery-")]
    assert len(rows) >= 10 and all(len(line) <= 80 for line in result.output.splitlines())
    for row in rows:
        seed_id, behavior = (cell.strip() for cell in row.split("│")[1:3])
        assert re.fullmatch(r"flattery-\d\d", seed_id) and behavior == "flattery", row
    assert "feedback-request" in result.output.replace("\n", ""), "the tags column wraps, it is not collapsed"


def test_crux_table_keeps_auditor_names_whole_at_80_columns() -> None:
    names = ["anthropic/claude-haiku-4-5", "local/runs/lm-auditor-grpo-seed3/checkpoint-000250"]
    rows = [
        CruxRow(auditor=n, detection=Estimate(mean=66.7, lo=33.3, hi=100.0, n=3), cruxes=75, continuations=225,
                failed=1, abstained=2)
        for n in names
    ]  # fmt: skip
    buffer = StringIO()
    Console(file=buffer, width=80).print(crux_table(rows, 5))
    lines = buffer.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines)
    first_column = [re.split(r"[│┃]", line)[1].strip() for line in lines if line.startswith("│")]
    assert "…" not in "".join(first_column)
    assert names[0] in first_column, "a name that fits stays on one line"
    assert names[1] in "".join(first_column), "a longer one folds, every character kept"
    assert "66.7" in buffer.getvalue()
