"""`auditrl train --dry-run`: every shipped GPU/CPU config plans for the world size its launch names, fits its
model's context, and gets vLLM's KV room and the fused LM head right."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from transformers import AutoTokenizer
from typer.testing import CliRunner

from auditrl.behaviors.library import load_behaviors, load_seeds
from auditrl.cli import app
from auditrl.configfile import read_kind
from auditrl.models.chat_templates import chat_template_text
from auditrl.train.config import EpisodeSettings, load_config
from auditrl.train.episodes import AuditEpisodeFactory
from auditrl.train.layout import batch_layout, read_launch
from auditrl.train.memory import (
    GIB,
    PROMPT_TOKENS,
    VLLM_RESERVED_GIB,
    memory_gib,
    model_shape,
    sequence_tokens,
    vllm_kv_room,
)
from auditrl.train.plan import uses_snapshot
from auditrl.train.rollout import ChatSegments, EpisodeRow

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
    assert re.search(rf"rollouts per rank\s+│ {layout.rollouts_per_rank} ", out)
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


def _variant(tmp_path: Path, name: str, old: str, new: str) -> Path:
    text = (CONFIGS / name).read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new).replace("accelerate/", f"{CONFIGS}/accelerate/"))
    return path


def test_rollout_that_outgrows_the_models_context_is_refused(tmp_path: Path) -> None:
    """api_targets.yaml once asked SmolLM2-1.7B (8,192 tokens of context) for 16k-token rollouts."""
    config = _variant(tmp_path, "api_targets.yaml", "max_completion_tokens: 6144", "max_completion_tokens: 16384")
    code, out = _dry_run("--config", str(config))
    text = " ".join(out.split())
    assert code == 2 and "exceeds the context of 'HuggingFaceTB/SmolLM2-1.7B-Instruct' (8,192 tokens)" in text
    assert "at most 6,144" in text
    assert sequence_tokens(load_config(CONFIGS / "api_targets.yaml")) <= 8192


def test_vllm_kv_room_is_set_against_live_tokens_with_a_preemption_warning(tmp_path: Path) -> None:
    cfg = load_config(CONFIGS / "gpu_single_vllm.yaml")
    shape = model_shape(cfg.policy.model)
    assert shape is not None
    room = vllm_kv_room(cfg, shape, batch_layout(cfg, 1))
    assert room is not None and room.preempts
    weights = shape.params * 2 / GIB
    expected = (0.6 * 79.6 - weights - VLLM_RESERVED_GIB) * GIB / shape.kv_bytes_per_token("bfloat16")
    assert abs(room.room_tokens - expected) <= 1
    assert room.live_tokens == 32 * (24576 + PROMPT_TOKENS["full"])
    code, out = _dry_run("--config", str(CONFIGS / "gpu_single_vllm.yaml"))
    text = " ".join(out.split())
    assert code == 0 and f"{room.room_tokens:,} tokens against up to {room.live_tokens:,} live tokens" in text
    assert "warning: vLLM's KV cache" in text and "preempts" in text
    roomy = _variant(tmp_path, "gpu_single_vllm.yaml", "data:\n  group_size: 8\n  groups_per_step: 4",
                     "launch:\n  gpu_memory_gib: 1000\ndata:\n  group_size: 8\n  groups_per_step: 1")  # fmt: skip
    code, out = _dry_run("--config", str(roomy))
    assert code == 0 and "warning" not in out


def test_fused_lm_head_counts_one_tile_not_the_logits() -> None:
    """TRL's fused head projects tiles of tokens x vocabulary; the (tokens x vocabulary) logits never exist."""
    cfg = load_config(CONFIGS / "multi_gpu_deepspeed.yaml")
    shape = model_shape(cfg.policy.model)
    assert shape is not None
    launch = read_launch(cfg)
    parts = memory_gib(cfg, shape, batch_layout(cfg, launch.processes), launch)
    assert "logits" not in parts
    logits = sequence_tokens(cfg) * shape.vocab * 2 / GIB
    assert parts["LM head (TRL's fused tiles)"] < logits / 5


def test_fsdp_without_a_full_state_dict_is_refused(tmp_path: Path) -> None:
    """Trainer.save_model writes nothing under SHARDED_STATE_DICT; FSDP 2's default when the file names none."""
    for old, new in [
        ("fsdp_state_dict_type: FULL_STATE_DICT", "fsdp_state_dict_type: SHARDED_STATE_DICT"),
        ("  fsdp_state_dict_type: FULL_STATE_DICT\n", ""),
    ]:
        launch = tmp_path / "fsdp.yaml"
        launch.write_text((CONFIGS / "accelerate" / "fsdp.yaml").read_text().replace(old, new))
        config = _variant(tmp_path, "multi_gpu_fsdp.yaml", "accelerate/fsdp.yaml", str(launch))
        code, out = _dry_run("--config", str(config))
        assert code == 2 and "saves no adapter" in " ".join(out.split()), out
    assert read_launch(load_config(CONFIGS / "multi_gpu_fsdp.yaml")).fsdp_state_dict_type == "FULL_STATE_DICT"


@pytest.mark.parametrize("prompt_set", sorted(PROMPT_TOKENS))
def test_opening_prompt_bound_holds_for_the_longest_seed(prompt_set: str, tokenizer_dir: Path) -> None:
    behaviors = load_behaviors()
    seeds = load_seeds(behavior_ids=list(behaviors))
    longest = max(seeds, key=lambda s: len(s.instructions))
    settings = EpisodeSettings(target_model="sim/{family}", families=["steady"], auditor_prompt=prompt_set)
    factory = AuditEpisodeFactory(settings, behaviors, seeds, "policy")
    row = EpisodeRow(behavior_id=longest.behavior, seed_id=longest.id, family="steady", benign=longest.behavior is None)
    segments = ChatSegments(AutoTokenizer.from_pretrained(tokenizer_dir))
    tokens = len(segments.prompt_ids(factory(row).auditor_messages()))
    assert 0 < tokens <= PROMPT_TOKENS[prompt_set]


def test_dry_run_writes_the_plan_as_json_and_html(tmp_path: Path) -> None:
    """The same rows and warnings the terminal shows, in the files every reporting command writes."""
    js, page = tmp_path / "plan.json", tmp_path / "plan.html"
    code, out = _dry_run("--config", str(CONFIGS / "gpu_single_vllm.yaml"), "--json", str(js), "--html", str(page))
    assert code == 0, out
    data = json.loads(js.read_text())
    cfg = load_config(CONFIGS / "gpu_single_vllm.yaml")
    layout = batch_layout(cfg, read_launch(cfg).processes)
    assert data["plan"]["rollouts per rank"].startswith(f"{layout.rollouts_per_rank} ")
    assert any("vLLM's KV cache" in w for w in data["warnings"])
    html = page.read_text()
    assert "rollouts per rank" in html and "warning: vLLM&#39;s KV cache" in html
    code, out = _dry_run(
        "--config", str(CONFIGS / "gpu_single_vllm.yaml"), "--json", str(CONFIGS / "gpu_single_vllm.yaml")
    )
    assert code == 2 and "Traceback" not in out  # the config itself is never overwritten


def test_html_and_json_are_refused_without_dry_run(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["train", "--config", str(CONFIGS / "cpu_offline.yaml"), "--json", str(tmp_path / "x.json")]
    )
    assert result.exit_code == 2 and "--dry-run" in result.output
    assert not (tmp_path / "x.json").exists()
