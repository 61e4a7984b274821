"""`auditrl train --dry-run`: every shipped GPU/CPU config plans for the world size its launch names."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from transformers import AutoTokenizer
from typer.testing import CliRunner

from auditrl.cli import app
from auditrl.train.config import chat_template_text, load_config, read_kind
from auditrl.train.plan import batch_layout, read_launch, uses_snapshot
from auditrl.train.rollout import ChatSegments

runner = CliRunner()
CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SHIPPED = sorted(p.name for p in CONFIGS.glob("*.yaml") if read_kind(p) == "grpo_lm")


def _dry_run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["train", "--dry-run", *args], env={"COLUMNS": "200"})
    return result.exit_code, result.output


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_config_plans_for_its_launch(name: str) -> None:
    cfg = load_config(CONFIGS / name)
    launch = read_launch(cfg)
    if cfg.launch.accelerate_config is not None and cfg.launch.num_processes is None:
        assert launch.processes == yaml.safe_load(cfg.launch.accelerate_config.read_text())["num_processes"]
    code, out = _dry_run("--config", str(CONFIGS / name))
    assert code == 0, out
    layout = batch_layout(cfg, launch.processes)
    assert f"{launch.processes} process(es)" in out
    assert f"rollouts per rank        │ {layout.rollouts_per_rank} " in out
    assert "total (training)" in out and "GiB" in out  # the shape of every shipped policy is known
    assert ("reference rollouts" in out) == uses_snapshot(cfg)


def test_cpu_config_plans_for_two_cpu_processes() -> None:
    processes = yaml.safe_load((CONFIGS / "accelerate" / "cpu_2proc.yaml").read_text())["num_processes"]
    code, out = _dry_run("--config", str(CONFIGS / "cpu_offline.yaml"), "--processes", str(processes))
    assert code == 0, out
    assert "KV cache (HF generation)" in out and "1 batched HF generate per turn" in out


def test_layout_that_cannot_start_is_one_clear_line() -> None:
    """56 rollouts per step (7 groups of 8) do not split over 16 processes."""
    code, out = _dry_run("--config", str(CONFIGS / "multi_gpu_deepspeed.yaml"), "--processes", "16")
    assert code == 2
    assert "56 rollouts per step must split evenly over 16 process(es)" in " ".join(out.split())
    assert "Traceback" not in out


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_templates_assemble_multi_turn(name: str, tokenizer_dir: Path) -> None:
    """Configs that override the template name one that multi-turn assembly accepts; Qwen3 models need one."""
    cfg = load_config(CONFIGS / name)
    if "qwen3" in cfg.policy.model.lower():
        assert cfg.policy.chat_template is not None
    if cfg.policy.chat_template is not None:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)  # ChatML tokens, like Qwen's
        tokenizer.chat_template = chat_template_text(cfg.policy.chat_template)
        ChatSegments(tokenizer)


def test_reference_snapshots_refuse_sharded_weights(tmp_path: Path) -> None:
    """The snapshot is swapped into each rank's whole adapter, which ZeRO-3 and FSDP shard."""
    zero3 = str(CONFIGS / "accelerate" / "deepspeed_zero3.yaml")
    text = (CONFIGS / "multi_gpu_deepspeed.yaml").read_text().replace("accelerate/deepspeed_zero2.yaml", zero3)
    config = tmp_path / "zero3.yaml"
    config.write_text(text)
    code, out = _dry_run("--config", str(config))
    assert code == 2 and "reference_pairwise" in out and "ZeRO-1/2" in out
    assert _dry_run("--config", str(config), "--processes", "1")[0] == 2  # the launch's sharding, not its size
