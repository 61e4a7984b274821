"""The AuditWorld report and `auditrl strategies` give the same transcript the same strategy archetype."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from auditrl.auditworld.job.run import run_from_config
from auditrl.cli.strategies import strategies

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "auditworld.yaml"


@pytest.mark.usefixtures("no_report_images")
def test_report_and_strategies_command_assign_the_same_archetypes(tmp_path: Path) -> None:
    raw = yaml.safe_load(CONFIG.read_text())
    raw["seeds"] = [0]
    raw["designs"] = [
        d for d in raw["designs"] if d["name"] in {"concerningness", "binary", "reference_pairwise_cal50"}
    ]
    raw["train"].update(max_steps=3, groups_per_step=8, group_size=4)
    raw["train"]["init"].update(dagger_rounds=1, audits_per_round=32, fit_steps=30, turn_budgets=[8])
    raw["evaluation"].update(rollouts=1, planted_turns=8, benign_turns=6)
    raw["analysis"].update(transcripts_per_policy=4, transcripts_saved=2, embedder="tfidf")
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(raw))
    run = run_from_config(path, tmp_path / "run")
    strategies_out = json.loads((run / "results.json").read_text())["strategies"]
    in_report = strategies_out["archetypes"]
    assert len(in_report) == 9 * 8  # 9 policies (5 scripted, the base, 3 designs) x (4 planted + 4 benign)

    app = typer.Typer()
    app.command()(strategies)
    js = tmp_path / "s.json"
    # Another representation and another k than the job's clustering, on a subset of its transcripts.
    result = CliRunner().invoke(app, [str(run), "--embedder", "lsa", "--k", "3", "--no-derive", "--json", str(js)])
    assert result.exit_code == 0, result.output
    command = json.loads(js.read_text())
    assert len(command["transcript_ids"]) == 9 * 4
    assert {i: a for i, a in zip(command["transcript_ids"], command["archetypes"], strict=True)} == {
        i: in_report[i] for i in command["transcript_ids"]
    }
    assert strategies_out["classifier"] == command["classifier"] == "lsa"
    rows = strategies_out["convergence"]
    assert {r["run"] for r in rows} >= {"concerningness", "binary", "reference_pairwise_cal50"}
    assert all(0.0 <= r["share"] <= 1.0 and r["transcripts"] == 8 for r in rows)
    assert "Strategies beside the paper" in (run / "report.html").read_text()
