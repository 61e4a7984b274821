"""`train` dispatches on the config's kind; `monitor` prints a run's monitors."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import auditrl.sim.run
import auditrl.train.grpo
from auditrl.cli import app
from auditrl.train.monitors import MonitorLog

runner = CliRunner()


@pytest.mark.parametrize(("kind", "module"), [("grpo_lm", auditrl.train.grpo), ("auditworld", auditrl.sim.run)])
def test_train_dispatches_on_kind(kind: str, module: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Path, Path | None]] = []

    def fake(config: Path, out: Path | None = None) -> Path:
        calls.append((config, out))
        return tmp_path / "run"

    monkeypatch.setattr(module, "run_from_config", fake)
    config = tmp_path / "c.yaml"
    config.write_text(f"kind: {kind}\n")
    result = runner.invoke(app, ["train", "--config", str(config), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert calls == [(config, tmp_path / "o")]


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
    assert missing.exit_code == 1
