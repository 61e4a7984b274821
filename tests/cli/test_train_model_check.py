"""`auditrl train` with a grpo_lm config checks every model it names (targets, an LLM judge) as `models check` does,
before the policy loads: one line naming the field, exit 2, nothing written; `--dry-run` only plans, so needs no key."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from auditrl.cli import app

CONFIG = """kind: grpo_lm
name: model-check
policy: {{model: smollm2}}
episodes: {{target_model: "{target}", families: [steady, chatty], max_completion_tokens: 2048}}
reward: {{design: reference_pairwise, judge: "{judge}"}}
"""
CASES: dict[str, tuple[str, str, str, str]] = {
    "judge without its key": (
        "sim/{family}",
        "anthropic/claude-haiku-4-5",
        "reward.judge anthropic/claude-haiku-4-5",
        "ANTHROPIC_API_KEY is not set",
    ),
    "target not installed": (
        "local/nope/{family}",
        "sim",
        "episodes.target_model local/nope/chatty",
        "local model 'nope/chatty' not found",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_model_the_config_names_that_cannot_be_called_stops_training_before_it_starts(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    target, judge, names, says = CASES[case]
    config = tmp_path / "train.yaml"
    config.write_text(CONFIG.format(target=target, judge=judge), encoding="utf-8")
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "--config", str(config), "--out", str(out)], terminal_width=300)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {config}: {names}: {says}"), result.output
    assert "fix:" in lines[0] and "Traceback" not in result.output
    assert not out.exists(), "nothing is written by a run refused before training starts"


def test_dry_run_plans_without_the_keys_of_the_models_it_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    config = tmp_path / "train.yaml"
    config.write_text(CONFIG.format(target="sim/{family}", judge="anthropic/claude-haiku-4-5"), encoding="utf-8")
    result = CliRunner().invoke(app, ["train", "--config", str(config), "--dry-run"], terminal_width=300)
    assert result.exit_code == 0, result.output
    assert "ANTHROPIC_API_KEY" not in result.output
