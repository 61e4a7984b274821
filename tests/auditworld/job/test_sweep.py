"""The robustness map: a tiny sweep writes its cells, the blind-baseline verdicts and the maps."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from auditrl.auditworld.job.sweep import load_sweep_config, run_sweep

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "auditworld_sweep.yaml"


def test_sweep_config_runs_alarm_and_credulity_from_zero_to_the_shared_levels() -> None:
    cfg = load_sweep_config(CONFIG)
    shared = cfg.judge.flaws
    assert min(cfg.sweep.alarm) == 0.0 and max(cfg.sweep.alarm) == shared.alarm
    assert min(cfg.sweep.credulity) == 0.0 and max(cfg.sweep.credulity) == shared.credulity
    assert 0.0 in cfg.sweep.position_bias and max(cfg.sweep.position_bias) > shared.position_bias


def test_tiny_sweep_writes_every_cell_and_the_map(tmp_path: Path) -> None:
    raw = yaml.safe_load(CONFIG.read_text())
    raw["seeds"] = [0]
    raw["designs"] = raw["designs"][:1]
    raw["sweep"] = {"alarm": [0.0, 0.6], "credulity": [0.0], "position_bias": [0.0]}
    raw["train"].update(max_steps=2, groups_per_step=4, group_size=4)
    raw["train"]["init"].update(dagger_rounds=0, audits_per_round=16, fit_steps=10, turn_budgets=[6])
    raw["evaluation"].update(rollouts=1, planted_turns=6, benign_turns=4)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(raw))
    run = run_sweep(path, tmp_path / "run")
    summary = json.loads((run / "sweep.json").read_text())
    cells = {(c["alarm"], c["credulity"], c["position_bias"]) for c in summary["cells"]}
    # the map at the shared position bias (0.15), then the position-bias line at the shared alarm and credulity
    assert cells == {(0.0, 0.0, 0.15), (0.6, 0.0, 0.15), (0.6, 0.5, 0.0)}
    assert set(summary["references"]) == {"blind", "experimenter", "base"}
    assert "the base's" in summary["robustness"]["ingroup_pairwise"]
    assert all(c["base"] == "base" for c in summary["cells"])
    html = (run / "report.html").read_text()
    assert "What this map shows and does not" in html and html.count("<img") == 4
    assert "from the base (imitation of experimenter" in html
