"""Another package's module declared under the `auditrl.plugins` entry points is loaded by the registries."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from auditrl import plugins
from auditrl.auditworld import designs as sim_designs
from auditrl.judges import registry as judges_registry
from auditrl.rewards import registry as rewards_registry

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The README's extension example as an installed package's module, declared under the entry-point group."""
    section = README.read_text(encoding="utf-8").split("## Extending auditrl", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found
    (tmp_path / "auditrl_toy_plugin.py").write_text(found.group(1), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(rewards_registry, "_DESIGNS", dict(rewards_registry._designs()))
    monkeypatch.setattr(judges_registry, "_FAMILIES", dict(judges_registry._families()))
    monkeypatch.setattr(sim_designs, "_VECTORISED", dict(sim_designs._VECTORISED))
    declared = [EntryPoint(name="toy", value="auditrl_toy_plugin", group=plugins.GROUP)]
    monkeypatch.setattr(plugins, "entry_points", lambda group: declared if group == plugins.GROUP else [])
    plugins.load_plugins.cache_clear()
    yield "auditrl_toy_plugin"
    plugins.load_plugins.cache_clear()
    sys.modules.pop("auditrl_toy_plugin", None)


def test_declared_modules_register_their_designs_and_families(installed_plugin: str) -> None:
    assert "honest_null" in rewards_registry.design_names()
    assert "honest_null" in sim_designs.vectorised_names()
    assert "strict_programmatic" in judges_registry.judge_family_names()
    assert plugins.load_plugins() == (installed_plugin,)
