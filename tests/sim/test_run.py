from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from auditrl.scaffold.store import read_transcripts
from auditrl.sim.run import load_config, run_from_config

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "auditworld.yaml"


def test_default_config_trains_every_design_over_three_seeds() -> None:
    cfg = load_config(CONFIG)
    assert len(cfg.seeds) >= 3
    got = {(d.design, d.benign_fraction) for d in cfg.designs}
    assert {("concerningness", 0.0), ("binary", 0.0), ("ingroup_pairwise", 0.0), ("reference_pairwise", 0.5)} <= got


def test_bad_config_names_the_file_and_field(tmp_path: Path) -> None:
    raw = yaml.safe_load(CONFIG.read_text())
    raw["designs"][0]["design"] = "vibes"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ValueError, match=r"bad\.yaml.*designs\.0\.design"):
        load_config(path)


def test_small_main_job_writes_results_transcripts_and_report(tmp_path: Path) -> None:
    raw = yaml.safe_load(CONFIG.read_text())
    raw["seeds"] = [0]
    raw["train"].update(steps=3, groups=8, group_size=4)
    raw["evaluation"].update(rollouts=1, planted_turns=8, benign_turns=6)
    raw["analysis"].update(transcripts_per_policy=3, transcripts_saved=1)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(raw))
    run = run_from_config(path, tmp_path / "run")
    results = json.loads((run / "results.json").read_text())
    assert set(results["results"]) == {"random", "experimenter", "interrogator", "concerningness", "binary",
                                       "ingroup_pairwise", "reference_pairwise_cal50"}  # fmt: skip
    for row in results["results"].values():
        assert set(row["estimates"]) == {"audit_quality", "fp_calibration", "realism", "composite"}
    assert len(read_transcripts(run / "transcripts.jsonl")) == 7 * 2
    html = (run / "report.html").read_text()
    assert "What this run shows and does not" in html and "<script" not in html
