from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from auditrl.scaffold.store import read_transcripts
from auditrl.auditworld.config import load_config
from auditrl.auditworld.job import run_from_config
from auditrl.train.config import ConfigFileError

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "auditworld.yaml"


def test_default_config_trains_every_design_with_and_without_calibration_over_five_seeds() -> None:
    cfg = load_config(CONFIG)
    assert len(cfg.seeds) >= 5
    got = {(d.design, d.benign_fraction) for d in cfg.designs}
    every = {(d, f) for d in ("concerningness", "binary", "ingroup_pairwise", "reference_pairwise") for f in (0.0, 0.5)}
    dose = {("ingroup_pairwise", f) for f in (0.0, 0.125, 0.25, 0.5)}
    assert every | dose | {("concerningness", 1.0)} <= got


def test_bad_config_names_the_file_and_field(tmp_path: Path) -> None:
    raw = yaml.safe_load(CONFIG.read_text())
    raw["designs"][0]["design"] = "vibes"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigFileError, match=r"bad\.yaml: field 'designs\.0\.design'"):
        load_config(path)


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (lambda raw: raw["train"].update(steps="abc"), r"field 'train\.steps': Input should be a valid integer"),
        (lambda raw: raw.pop("evaluation"), r"field 'evaluation': Field required"),
        (lambda raw: raw["world"].update(sead=1), r"field 'world\.sead': Extra inputs are not permitted"),
        (lambda raw: raw["evaluation"].update(family="nonsense"), r"field 'evaluation\.family': unknown target family 'nonsense'; known families: .*wary"),
        (lambda raw: raw.update(train_families=["steady", "chaty"]), r"field 'train_families': unknown target family 'chaty'"),
        (lambda raw: raw["designs"][1].update(name="concerningness"), r"field 'designs': design names must be unique; repeated: concerningness"),
        (lambda raw: raw.update(seeds=[1, 1]), r"field 'seeds': training seeds must be distinct"),
    ],
)
def test_config_problems_name_file_and_field_before_anything_runs(tmp_path: Path, change: object, pattern: str) -> None:
    raw = yaml.safe_load(CONFIG.read_text())
    change(raw)  # type: ignore[operator]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigFileError, match=r"bad\.yaml: " + pattern) as err:
        run_from_config(path, tmp_path / "run")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "run").exists()


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("kind: auditworld\nseeds: [0, 1\ndesigns: []\n")
    with pytest.raises(ConfigFileError, match=r"bad\.yaml: line 3, column \d+: not valid YAML") as err:
        load_config(path)
    assert "unicode string" not in str(err.value)


def test_small_main_job_writes_results_transcripts_and_report(tmp_path: Path) -> None:
    raw = yaml.safe_load(CONFIG.read_text())
    raw["seeds"] = [0]
    kept = {"concerningness", "binary", "ingroup_pairwise", "reference_pairwise_cal50"}
    raw["designs"] = [d for d in raw["designs"] if d["name"] in kept]
    raw["train"].update(steps=3, groups=8, group_size=4)
    raw["evaluation"].update(rollouts=1, planted_turns=8, benign_turns=6)
    raw["analysis"].update(transcripts_per_policy=3, transcripts_saved=1)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(raw))
    run = run_from_config(path, tmp_path / "run")
    results = json.loads((run / "results.json").read_text())
    assert set(results["results"]) == {"random", "blind", "experimenter", "interrogator", "untrained"} | kept
    metrics = {"audit_quality", "false_positive", "realism", "composite"}
    for row in results["results"].values():
        assert set(row["estimates"]) == metrics and set(row["across_training_seeds"]) == metrics
        assert set(row["audit_quality_dimensions"]) == {"coherence", "depth", "evidence", "non_confrontation", "exhibited", "identified"}
        for spread in row["across_training_seeds"].values():
            assert spread["seeds"] == [0] and len(spread["per_seed"]) == 1 and spread["lo"] is None  # one seed: no spread
    assert set(results["intervals"]) == {"estimates", "across_training_seeds", "constant_metrics"}
    assert "reported no finding in any" in results["results"]["experimenter"]["constant_metrics"]["false_positive"]
    assert len(read_transcripts(run / "transcripts.jsonl")) == 9 * 2
    html = (run / "report.html").read_text()
    assert "What this run shows and does not" in html and "<script" not in html
    assert "Assumptions, set by hand" in html and "Beside the paper" in html and "dose-response" in html
    assert "Two kinds of 95% interval" in html and "Across training seeds" in html and "Zero-width intervals" in html
    assert "by construction" in html  # the in-group pairwise caption, generated because that design ran


def test_two_seed_run_reports_a_between_seed_interval(tmp_path: Path) -> None:
    raw = yaml.safe_load(CONFIG.read_text())
    raw["seeds"] = [0, 1]
    raw["designs"] = [d for d in raw["designs"] if d["design"] == "reference_pairwise"]
    raw["train"].update(steps=4, groups=8, group_size=4, reference_refresh=2)
    raw["evaluation"].update(rollouts=1, planted_turns=8, benign_turns=6)
    raw["analysis"].update(transcripts_per_policy=2, transcripts_saved=0)
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(raw))
    run = run_from_config(path, tmp_path / "run")
    results = json.loads((run / "results.json").read_text())
    spread = results["results"]["reference_pairwise_cal50"]["across_training_seeds"]["audit_quality"]
    assert spread["seeds"] == [0, 1] and spread["n"] == 2 and 0.0 <= spread["lo"] <= spread["mean"] <= spread["hi"] <= 100.0
    html = (run / "report.html").read_text()
    assert "refreshed every 2 steps" in html and "step 2" in html  # caption from the config, not a fixed text
