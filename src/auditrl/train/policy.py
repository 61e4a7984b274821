"""Loading the auditor policy in a trainable state: fresh, or warm-started from a saved LoRA adapter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from peft import LoraConfig, PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from auditrl.models.local import ADAPTER_CONFIG, WeightsSource, adapter_base, dense_source, resolve_source
from auditrl.models.precision import on_gpu, resolve_dtype, torch_dtype
from auditrl.train.config import LoraSettings, PolicySettings, chat_template_text

LORA_FIELDS = {"r": "r", "lora_alpha": "alpha", "lora_dropout": "dropout", "target_modules": "target_modules"}
"""peft's adapter-config keys and the `policy.lora` fields they must agree with for a warm start."""


def load_policy(settings: PolicySettings) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load the auditor model in a trainable state (a GGUF file is read from its dense conversion).

    With `init_adapter`, the model comes back as a PeftModel holding that adapter, trainable; otherwise the
    trainer adds a fresh adapter from `lora_config`.
    """
    source = resolve_source(settings.model)
    weights = dense_source(WeightsSource(source.location, settings.gguf_file or source.gguf_file))
    tokenizer = AutoTokenizer.from_pretrained(weights.location)
    model_kwargs: dict[str, Any] = {}
    if settings.attn_implementation:
        model_kwargs["attn_implementation"] = settings.attn_implementation
    if settings.init_adapter is not None:
        check_init_adapter(settings)
    model = AutoModelForCausalLM.from_pretrained(weights.location, dtype=torch_dtype(settings.dtype), **model_kwargs)
    if settings.chat_template is not None:
        tokenizer.chat_template = chat_template_text(settings.chat_template)
    if tokenizer.chat_template is None:
        raise ValueError(f"policy.model '{settings.model}' has no chat template; use an instruction-tuned model")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if settings.init_adapter is not None:
        model = PeftModel.from_pretrained(model, str(settings.init_adapter), is_trainable=True)
        _check_layers(settings, model)
    return model, tokenizer


def check_init_adapter(settings: PolicySettings) -> None:
    """`policy.init_adapter` is an adapter of `policy.model` with `policy.lora`'s settings; raises ValueError."""
    from auditrl.train.outputs import portable_base

    folder = Path(str(settings.init_adapter))
    where = f"field 'policy.init_adapter' ({str(folder)!r})"
    if not (folder / ADAPTER_CONFIG).is_file():
        raise ValueError(f"{where}: no {ADAPTER_CONFIG} there; point it at the adapter/ directory of `auditrl sft`")
    base = adapter_base(str(folder))
    if base != portable_base(settings):
        raise ValueError(f"{where}: the adapter was trained on {base!r}, but policy.model is {settings.model!r}")
    saved = json.loads((folder / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    for key, name in LORA_FIELDS.items():
        want = getattr(settings.lora, name)
        have = saved.get(key)
        if key == "target_modules":
            want, have = sorted(want), sorted(have or [])
        if have != want:
            raise ValueError(f"{where}: the adapter has {key}={have!r}, but policy.lora.{name} is {want!r}; make them agree")


def _check_layers(settings: PolicySettings, model: PeftModel) -> None:
    """The adapter covers the layers `policy.lora.last_layers` names (they decide where the backward pass stops)."""
    saved = model.peft_config["default"].layers_to_transform
    want = top_layers(model, settings.lora.last_layers)
    have = None if saved is None else sorted([saved] if isinstance(saved, int) else saved)
    if have != want:
        raise ValueError(
            f"field 'policy.init_adapter' ({str(settings.init_adapter)!r}): the adapter adapts layers {have or 'all'}, but "
            f"policy.lora.last_layers={settings.lora.last_layers} means {want or 'all'}; make them agree"
        )


def precision_args(settings: PolicySettings) -> dict[str, bool]:
    """A transformers Trainer's precision flags for the policy's dtype. Needed because TRL's SFTConfig turns bf16
    mixed precision on by default, even on a CPU (`use_cpu=True`) that emulates bf16 at a 60th of float32's speed."""
    dtype = resolve_dtype(settings.dtype)
    return {"bf16": dtype == "bfloat16", "fp16": dtype == "float16", "use_cpu": not on_gpu()}


def lora_config(lora: LoraSettings, model: PreTrainedModel) -> LoraConfig:
    """The peft adapter of `lora` for `model` (its `last_layers` resolved against the model's depth)."""
    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        layers_to_transform=top_layers(model, lora.last_layers),
        task_type="CAUSAL_LM",
    )


def top_layers(model: PreTrainedModel, last: int | None) -> list[int] | None:
    """Indices of the last `last` decoder layers (None = every layer), for peft's `layers_to_transform`."""
    if last is None:
        return None
    total = int(model.config.num_hidden_layers)
    return list(range(max(0, total - last), total))
