"""The experiment's configs live with it: each validates with its section checked against the run, and the
thirtieth documented run's config still plans; the trainer alone refuses to run one."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from auditrl.cli import app as auditrl_app
from auditrl.experiments.small_lm.cli import app
from auditrl.experiments.small_lm.settings import SmallLMSettings, load_run_config

CONFIGS = Path(__file__).resolve().parents[3] / "configs" / "experiments" / "small_lm"
QUOTE_ANCHOR = CONFIGS / "cpu_learn_evidence_sft_quote_anchor.yaml"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_experiment_config_loads_with_its_section_checked(path: Path) -> None:
    cfg = load_run_config(path)
    assert isinstance(cfg.experiment, SmallLMSettings) and cfg.policy.model == "smollm2"


def test_the_quote_anchor_runs_config_loads_and_plans() -> None:
    cfg = load_run_config(QUOTE_ANCHOR)
    assert cfg.experiment.trained_tokens == "quote" and cfg.experiment.expected_verdict == "start"  # type: ignore[union-attr]
    result = CliRunner().invoke(app, ["train", "--config", str(QUOTE_ANCHOR), "--dry-run"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "rollouts per step" in result.output and "16 (4 groups of 4)" in result.output


def test_the_trainer_alone_refuses_an_experiment_config_before_writing_anything(tmp_path: Path) -> None:
    result = CliRunner().invoke(auditrl_app, ["train", "--config", str(QUOTE_ANCHOR), "--out", str(tmp_path / "run")],
                                env={"COLUMNS": "300"})  # fmt: skip
    assert result.exit_code == 2 and "python -m auditrl.experiments.small_lm train" in result.output, result.output
    assert not (tmp_path / "run").exists()


def test_a_bad_experiment_setting_names_the_file_and_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(QUOTE_ANCHOR.read_text().replace("quote_unit: sentence", "quote_unit: paragraph"))
    with pytest.raises(ValueError, match=r"bad\.yaml: field 'experiment\.quote_unit'"):
        load_run_config(bad)
