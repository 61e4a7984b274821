"""A trained adapter plays any role as `local/<adapter dir>`: its base model is read from the adapter's config,
where training records it by a portable name, and the adapter is merged into it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from inspect_ai.model import ChatMessageUser, GenerateConfig, get_model
from peft import LoraConfig, get_peft_model
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

import auditrl.models.local as local
from auditrl.models.local import ADAPTER_CONFIG, adapter_base, dense_source, load_local, smollm2_source
from auditrl.train.config import PolicySettings
from auditrl.train.outputs import finalize_adapter


@pytest.fixture(scope="module")
def trained_adapter(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, torch.Tensor]:
    """A one-layer base model directory and a LoRA adapter on it with nonzero weights; also the adapted logits."""
    root = tmp_path_factory.mktemp("adapter")
    source = smollm2_source()
    tokenizer = AutoTokenizer.from_pretrained(dense_source(source).location)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    base = LlamaForCausalLM(config)
    base.save_pretrained(root / "base")
    tokenizer.save_pretrained(root / "base")
    peft_model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    for name, p in peft_model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.5)
    peft_model.save_pretrained(root / "adapter")
    with torch.no_grad():
        logits = peft_model(input_ids=torch.tensor([[1, 2, 3, 4]])).logits
    config_file = root / "adapter" / ADAPTER_CONFIG
    data = json.loads(config_file.read_text())
    data["base_model_name_or_path"] = str(root / "base")
    config_file.write_text(json.dumps(data))
    return root / "adapter", logits


def test_adapter_directory_loads_its_base_and_merges(trained_adapter: tuple[Path, torch.Tensor]) -> None:
    adapter, expected = trained_adapter
    loaded = load_local(str(adapter), dtype="float32")  # compared with float32 logits to 1e-5
    with torch.no_grad():
        logits = loaded.model(input_ids=torch.tensor([[1, 2, 3, 4]])).logits
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5)
    base = load_local(adapter_base(str(adapter)) or "", dtype="float32")
    assert base.model is not loaded.model  # the base stays a model of its own


async def test_adapter_plays_a_role_through_inspect(trained_adapter: tuple[Path, torch.Tensor]) -> None:
    adapter, _ = trained_adapter
    output = await get_model(f"local/{adapter}", memoize=False).generate(
        [ChatMessageUser(content="Hello")], config=GenerateConfig(max_tokens=4)
    )
    assert output.usage is not None and 0 < output.usage.output_tokens <= 4


def test_training_records_a_portable_base_name(tmp_path: Path) -> None:
    (tmp_path / ADAPTER_CONFIG).write_text(json.dumps({"base_model_name_or_path": "/some/machine/path/to/gguf-dir"}))
    finalize_adapter(tmp_path, PolicySettings(model="smollm2"))
    assert adapter_base(str(tmp_path)) == "smollm2"
    assert local.resolve_source("smollm2") == smollm2_source()


def test_adapter_without_a_base_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / ADAPTER_CONFIG).write_text(json.dumps({"r": 4}))
    with pytest.raises(ValueError, match="base_model_name_or_path"):
        adapter_base(str(tmp_path))
