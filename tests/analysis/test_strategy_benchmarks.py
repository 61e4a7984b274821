"""The strategy benchmarks run end to end at a tiny size, so their README figures stay reproducible."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from benchmark_scripts import run_benchmark

ROOT = Path(__file__).resolve().parents[2]


def test_strategies_at_scale_runs_at_a_tiny_size() -> None:
    """On LSA, the embedder `auto` takes at the README's 81,000 transcripts: at 300 `auto` would load MiniLM, a path
    the scaled run never takes (and most of a tiny run's cost)."""
    out = run_benchmark("strategies_at_scale.py", "--transcripts", "300", "--embedder", "lsa", cwd=ROOT)
    assert "auditrl strategies on" in out and "Derived from too few transcripts" in out
    assert re.search(r"│ embedder +│ +lsa │", out)  # the command was given the option


@pytest.mark.slow
def test_strategy_labels_runs_at_a_tiny_size(tmp_path: Path) -> None:
    raw = yaml.safe_load((ROOT / "configs" / "auditworld.yaml").read_text())
    raw["seeds"] = [0]
    raw["designs"] = [d for d in raw["designs"] if d["name"] in {"binary", "reference_pairwise_cal50"}]
    raw["train"].update(max_steps=2, groups_per_step=4, group_size=4)
    raw["train"]["init"].update(dagger_rounds=1, audits_per_round=32, fit_steps=30, turn_budgets=[6])
    raw["evaluation"].update(rollouts=1, planted_turns=6, benign_turns=4)
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(raw))
    run = str(tmp_path / "run")
    out = run_benchmark("strategy_labels.py", "--config", str(config), "--run", run, "--per", "2", cwd=tmp_path)
    assert "category agreement, per transcript" in out and "Strategies beside the paper" in out
