"""The co-training job: the shipped config loads, bad configs fail in one line, a tiny run writes every output."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from auditrl.auditworld.job.adversarial import AUDITORS, TARGETS, load_adversarial_config, run_adversarial
from auditrl.cli import app
from auditrl.configfile import ConfigFileError

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "auditworld_adversarial.yaml"


def _raw() -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    return raw


def _write(tmp_path: Path, raw: dict[str, Any]) -> Path:
    path = tmp_path / "adv.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_shipped_config_co_trains_every_design_it_lists_for_the_same_steps_as_its_control() -> None:
    cfg = load_adversarial_config(CONFIG)
    adv = cfg.adversary
    assert adv.designs == [d.name for d in cfg.designs]
    assert cfg.train.max_steps == adv.rounds * adv.auditor_steps
    assert adv.start_family in cfg.train_families and cfg.evaluation.family not in cfg.train_families
    assert len(cfg.seeds) >= 3  # a t-interval over seeds needs a few


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda r: r["adversary"].update(designs=["nope"]), "adversary.designs"),
        (lambda r: r["adversary"].update(start_family="nope"), "adversary.start_family"),
        (lambda r: r["adversary"].update(family_name="wary"), "adversary.family_name"),
        (lambda r: r["adversary"]["target"].update(lift_floor=120), "adversary.target.lift_floor"),
        (lambda r: r["adversary"].update(rounds=0), "adversary.rounds"),
        (lambda r: r["train"].update(max_steps=7), "train.max_steps"),
        (lambda r: r["adversary"].update(target_step=3), "adversary.target_step"),
    ],
)
def test_a_bad_config_fails_in_one_line_naming_file_and_field(tmp_path: Path, change: Any, field: str) -> None:
    raw = _raw()
    change(raw)
    path = _write(tmp_path, raw)
    with pytest.raises(ConfigFileError) as err:
        load_adversarial_config(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(path)) and f"'{field}'" in message


def test_auditrl_train_dispatches_the_kind_and_reports_a_bad_config_in_one_line(tmp_path: Path) -> None:
    raw = _raw()
    raw["adversary"]["target"]["lift_floor"] = -1
    path = _write(tmp_path, raw)
    result = CliRunner().invoke(app, ["train", "--config", str(path), "--out", str(tmp_path / "run")])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "adversary.target.lift_floor" in lines[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.usefixtures("no_report_images")
def test_tiny_run_writes_tables_curves_and_results(tmp_path: Path) -> None:
    raw = _raw()
    raw["seeds"] = [0, 1]
    raw["designs"] = raw["designs"][1:2]
    raw["adversary"].update(designs=[raw["designs"][0]["name"]], rounds=2, auditor_steps=2, target_steps=2)
    raw["adversary"]["target"].update(episodes_per_step=16, natural_turns=6, audit_turns=6)
    raw["train"].update(groups_per_step=4, group_size=4, max_turns=6)
    raw["train"]["init"].update(dagger_rounds=0, audits_per_round=16, fit_steps=10, turn_budgets=[6])
    raw["evaluation"].update(rollouts=1, planted_turns=6, benign_turns=4)
    raw["evaluation"]["family"] = "wary"
    run = run_adversarial(_write(tmp_path, raw), tmp_path / "run")
    results = json.loads((run / "adversarial.json").read_text())
    design = raw["designs"][0]["name"]
    ev = results["evaluation"][design]
    assert set(ev) == set(AUDITORS) and all(set(ev[a]) == set(TARGETS) for a in AUDITORS)
    ident = ev["fixed"]["co-trained"]["identified"]
    assert ident["n"] == 2 and len(ident["per_seed"]) == 2 and ident["lo"] <= ident["mean"] <= ident["hi"]
    curves = results["target_curves"][design]
    assert len(curves) == 2 and [s["step"] for s in curves[0]] == [0, 1, 2, 3]  # two phases of two steps
    assert set(results["targets"][design]) >= {"lift start", "lift end", "confession_rate end", "rate express"}
    md = (run / "tables.md").read_text()
    assert "Transfer" in md and "Co-trained minus fixed auditor" in md and "A target that adapts to the auditor" in md
    csvs = sorted((run / "tables").glob("*.csv"))
    assert len(csvs) == 7
    header = next(csv.reader(csvs[0].read_text().splitlines()))
    assert header[:3] == ["design", "auditor", "ident. %"]
    html = (run / "report.html").read_text()
    assert html.count("<img") == 4 and "What this rests on" in html and "<script" not in html
