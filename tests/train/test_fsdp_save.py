"""The FSDP launch saves a loadable adapter: Trainer.save_model's FSDP branch under the shipped plugin settings.

On a CPU accelerate never enables FSDP, so this drives the Trainer's own FSDP save branch with a real
FullyShardedDataParallelPlugin built from configs/accelerate/fsdp.yaml; the one stand-in is the full state
dict FSDP would gather on rank 0, here the unsharded model's own.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from accelerate.utils import FullyShardedDataParallelPlugin
from peft import PeftModel
from train_fakes import FakeEpisode, LengthDesign, rows_for, tiny_config, tiny_policy

from auditrl.train.grpo import build_trainer
from auditrl.train.plan import check_fsdp_saves_adapter
from auditrl.train.snapshot import adapter_parameters

FSDP_FILE = Path(__file__).resolve().parents[2] / "configs" / "accelerate" / "fsdp.yaml"


def _save_under(
    state_dict_type: str, tokenizer_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, check: bool = True
) -> Path:
    trainer, _, reward = build_trainer(
        tiny_config(), tmp_path / "run", factory=lambda row: FakeEpisode(row), design=LengthDesign(),
        rows=rows_for(steps=1, groups=2), policy=tiny_policy(tokenizer_dir),
    )  # fmt: skip
    reward.runner.close()
    with torch.no_grad():
        for name, p in adapter_parameters(trainer.model).items():
            p.copy_(torch.full_like(p, 0.01 * (1 + len(name) % 7)))
    fsdp = yaml.safe_load(FSDP_FILE.read_text())["fsdp_config"]
    plugin = FullyShardedDataParallelPlugin(fsdp_version=fsdp["fsdp_version"], state_dict_type=state_dict_type)
    monkeypatch.setattr(trainer, "is_fsdp_enabled", True)
    monkeypatch.setattr(trainer.accelerator, "state", SimpleNamespace(fsdp_plugin=plugin))
    monkeypatch.setattr(
        trainer.accelerator,
        "get_state_dict",
        lambda model, unwrap=True: trainer.accelerator.unwrap_model(model).state_dict(),
    )
    out = tmp_path / state_dict_type
    if check:  # what build_trainer checks before training
        check_fsdp_saves_adapter(str(plugin.state_dict_type), FSDP_FILE)
    trainer.save_model(str(out))
    return out


def test_shipped_fsdp_settings_save_a_loadable_adapter(
    tokenizer_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state_dict_type = yaml.safe_load(FSDP_FILE.read_text())["fsdp_config"]["fsdp_state_dict_type"]
    out = _save_under(state_dict_type, tokenizer_dir, tmp_path, monkeypatch)
    assert (out / "adapter_config.json").is_file() and (out / "adapter_model.safetensors").is_file()
    base, _ = tiny_policy(tokenizer_dir)
    loaded = adapter_parameters(PeftModel.from_pretrained(base, out))
    assert loaded and all(torch.allclose(p, torch.full_like(p, 0.01 * (1 + len(n) % 7))) for n, p in loaded.items())


def test_sharded_state_dict_would_save_nothing_and_is_refused(
    tokenizer_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match="saves no adapter"):
        _save_under("SHARDED_STATE_DICT", tokenizer_dir, tmp_path, monkeypatch)
    out = _save_under("SHARDED_STATE_DICT", tokenizer_dir, tmp_path / "unchecked", monkeypatch, check=False)
    assert not (out / "adapter_model.safetensors").exists()
