"""The README's extension example: one file registers a design and a judge family, and both are then everywhere."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from reward_factories import rewards, transcript

from auditrl.auditworld import designs as sim_designs
from auditrl.auditworld.job.config import DesignRun
from auditrl.auditworld.training import TrainConfig, train
from auditrl.auditworld.world import World
from auditrl.behaviors.library import load_behaviors
from auditrl.judges import registry as judges_registry
from auditrl.rewards import registry as rewards_registry
from auditrl.rewards.registry import build_design, design_names
from auditrl.testing import ContractError, check_reward_design
from auditrl.train.config import RewardSettings

README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_file(name: str) -> str:
    """The python block of the README's Extending auditrl section that opens with `# <name>`."""
    section = README.read_text(encoding="utf-8").split("## Extending auditrl", 1)[1].split("\n## ", 1)[0]
    blocks = {b.split("\n", 1)[0]: b for b in re.findall(r"```python\n(.*?)```", section, re.S)}
    assert f"# {name}" in blocks, f"the README's Extending auditrl section has no python block for {name}"
    return blocks[f"# {name}"]


@pytest.fixture
def extensions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """Import the README example from a file of its own; the registries are restored afterwards."""
    monkeypatch.setattr(rewards_registry, "_DESIGNS", dict(rewards_registry._designs()))
    monkeypatch.setattr(judges_registry, "_FAMILIES", dict(judges_registry._families()))
    monkeypatch.setattr(sim_designs, "_VECTORISED", dict(sim_designs._VECTORISED))
    path = tmp_path / "my_extensions.py"
    path.write_text(_readme_file("my_extensions.py"), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("my_extensions", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_builtin_designs_and_families_are_registered() -> None:
    assert set(design_names()) == {
        "concerningness", "binary", "binary_strict", "ingroup_pairwise", "ingroup_bradley_terry", "reference_pairwise",
        "reference_pairwise_graded",
    }  # fmt: skip
    assert set(judges_registry.judge_family_names()) == {"programmatic", "sim"}
    assert set(sim_designs.vectorised_names()) == {
        "concerningness",
        "binary",
        "binary_strict",
        "ingroup_pairwise",
        "reference_pairwise",
    }
    assert set(sim_designs.vectorised_names()) <= set(design_names())  # every AuditWorld form is of a registered design


async def test_example_design_is_a_config_choice_and_is_dispatched(extensions: ModuleType) -> None:
    assert "honest_null" in design_names()
    assert RewardSettings(design="honest_null").design == "honest_null"
    with pytest.raises(ValueError, match="unknown reward design 'nope'; choose one of .*honest_null"):
        RewardSettings(design="nope")
    design = build_design("honest_null", "programmatic")
    group = [transcript("a", null_report=True), transcript("b", null_report=False), transcript("c")]
    assert await rewards(design, group) == [1.0, 0.0, 0.0]


def test_example_design_trains_in_auditworld(extensions: ModuleType) -> None:
    assert DesignRun(name="toy", design="honest_null").design == "honest_null"
    world = World.build(load_behaviors(), seeds_per_behavior=2)
    result = train(
        world,
        TrainConfig(
            design="honest_null",
            max_steps=2,
            groups_per_step=4,
            group_size=2,
            families=["steady"],
            init={"kind": "random"},
        ),
    )
    assert len(result.history) == 2
    assert result.history[0].reward == pytest.approx(1.0 - result.history[0].claim_rate)


def test_a_design_without_an_auditworld_form_is_refused_by_name() -> None:
    with pytest.raises(
        ValueError, match="'ingroup_bradley_terry' has no AuditWorld form; AuditWorld trains concerningness"
    ):
        DesignRun(name="x", design="ingroup_bradley_terry")


def test_the_readme_plugin_passes_the_installed_contract_checks_in_its_own_test(tmp_path: Path) -> None:
    """The README's plugin and its test file, in a directory of their own, run by pytest outside this suite."""
    for name in ("my_extensions.py", "test_my_extensions.py"):
        (tmp_path / name).write_text(_readme_file(name), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_my_extensions.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "2 passed" in run.stdout


def test_a_plugin_whose_two_forms_disagree_fails_the_check_by_name(extensions: ModuleType) -> None:
    """The check compares a plugin's vectorised form with its per-transcript form, not only the built-ins'."""
    sim_designs.vectorised("honest_null")(lambda x: (x.observed.claim >= 0).astype(np.float64))
    with pytest.raises(ContractError, match=r"honest_null: vectorised form: \d+ of \d+ rollouts differ"):
        check_reward_design("honest_null")


async def test_example_judge_family_is_a_judge_choice(extensions: ModuleType) -> None:
    assert RewardSettings(judge="strict_programmatic").judge == "strict_programmatic"
    design = build_design("binary", "strict_programmatic")
    assert design.name == "binary_strict"  # the family's binary judge is strict whatever the design asks
    assert "strict_programmatic" in judges_registry.judge_spec_help()
