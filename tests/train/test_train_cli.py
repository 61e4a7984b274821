"""`train` dispatches on the config's kind; `monitor` prints a run's monitors."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import auditrl.auditworld.job.run
import auditrl.train.grpo
from auditrl.cli import app
from auditrl.train.monitors import MonitorLog

runner = CliRunner()
CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.mark.parametrize(
    ("kind", "module"), [("grpo_lm", auditrl.train.grpo), ("auditworld", auditrl.auditworld.job.run)]
)
def test_train_dispatches_on_kind(kind: str, module: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Path, Path | None]] = []

    def fake(config: Path, out: Path | None = None) -> Path:
        calls.append((config, out))
        if kind == "grpo_lm":  # a finished run: the CLI writes its page from the monitors
            (tmp_path / "run").mkdir(exist_ok=True)
            MonitorLog(tmp_path / "run", tensorboard=False).write(0, {"reward/mean": 0.5})
        return tmp_path / "run"

    monkeypatch.setattr(module, "run_from_config", fake)
    config = tmp_path / "c.yaml"
    config.write_text(f"kind: {kind}\n" + ("policy: {model: smollm2}\n" if kind == "grpo_lm" else ""))
    result = runner.invoke(app, ["train", "--config", str(config), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert calls == [(config, tmp_path / "o")]
    assert (tmp_path / "run" / "report.html").is_file() == (kind == "grpo_lm")


def test_train_rejects_unknown_kind(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("kind: sft\n")
    result = runner.invoke(app, ["train", "--config", str(config)])
    assert result.exit_code == 2 and "kind" in result.output


def test_monitor_prints_table(tmp_path: Path) -> None:
    log = MonitorLog(tmp_path, tensorboard=False)
    log.write(0, {"reward/mean": 0.25})
    result = runner.invoke(app, ["monitor", str(tmp_path)])
    assert result.exit_code == 0 and "reward/mean" in result.output and "0.250" in result.output
    missing = runner.invoke(app, ["monitor", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "nope" in missing.output


def _auditworld_config(tmp_path: Path, edit: str) -> Path:
    """The shipped AuditWorld config with one line replaced (`old=>new`)."""
    old, new = edit.split("=>")
    text = (CONFIGS / "auditworld.yaml").read_text()
    assert old in text
    path = tmp_path / "c2.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ("max_steps: 60=>max_steps: many", "field 'train.max_steps': Input should be a valid integer"),
        ("seeds: [0, 1, 2, 3, 4]\n=>", "field 'seeds': Field required"),
        ("  learning_rate: 0.003=>  learning_rate: 0.003\n  lrr: 0.02", "field 'train.lrr': unknown field (known: "),
        ("family: wary=>family: nonsense", "field 'evaluation.family': unknown target family 'nonsense'"),
        ("[steady, chatty=>[steady, chaty", "field 'train_families': unknown target family 'chaty'"),
        ("design: binary,=>design: binery,", "field 'designs.3.design'"),
        ("name: binary,=>name: concerningness,", "field 'designs': design names must be unique"),
        (
            "seeds: [0, 1, 2, 3, 4]=>seeds: [0, 0]",
            "training seeds must be distinct (each one is a separate training run), got [0, 0]",
        ),
        ("seeds: [0, 1, 2, 3, 4]=>seeds: [0, 1, 2, 3, 4", "line 11, column"),
    ],
)
def test_auditworld_config_errors_are_one_clean_line(tmp_path: Path, edit: str, expected: str) -> None:
    config = _auditworld_config(tmp_path, edit)
    result = runner.invoke(app, ["train", "--config", str(config), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {config}: ") and expected in lines[0]
    assert "Traceback" not in result.output and "<unicode string>" not in result.output
    assert not (tmp_path / "o").exists()


def test_grpo_config_errors_stop_before_any_model_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("training started on a bad config")

    monkeypatch.setattr(auditrl.train.grpo, "train_run", no_training)
    monkeypatch.setattr(auditrl.train.grpo, "load_policy", no_training)
    config = tmp_path / "g.yaml"
    config.write_text((CONFIGS / "cpu_offline.yaml").read_text().replace("judge: sim", "judge: programatic"))
    result = runner.invoke(app, ["train", "--config", str(config)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"error: {config}: field 'reward.judge': unknown judge 'programatic'"
    )
