"""Loading the auditor policy in a trainable state: fresh, or warm-started from a saved LoRA adapter."""

from __future__ import annotations

import json
from pathlib import Path

from peft import LoraConfig, PeftModel
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from auditrl.models.chat_templates import chat_template_text
from auditrl.models.local import ADAPTER_CONFIG, adapter_base
from auditrl.models.lora import load_chat_model, top_layers
from auditrl.train.config import PolicySettings

LORA_FIELDS = {"r": "r", "lora_alpha": "alpha", "lora_dropout": "dropout", "target_modules": "target_modules"}
"""peft's adapter-config keys and the `policy.lora` fields they must agree with for a warm start."""


def load_policy(settings: PolicySettings) -> tuple[PreTrainedModel | PeftModel, PreTrainedTokenizerBase]:
    """Load the auditor model in a trainable state (a GGUF file is read from its dense conversion).

    With `init_adapter`, the model comes back as a PeftModel holding that adapter, trainable; otherwise the
    trainer adds a fresh adapter from `lora_config`.
    """
    if settings.init_adapter is not None:
        check_init_adapter(settings)
    template = chat_template_text(settings.chat_template) if settings.chat_template is not None else None
    model, tokenizer = load_chat_model(
        settings.model, settings.dtype, settings.gguf_file, settings.attn_implementation, template, what="policy.model"
    )
    if settings.init_adapter is not None:
        adapted = PeftModel.from_pretrained(model, str(settings.init_adapter), is_trainable=True)
        _check_layers(settings, adapted)
        return adapted, tokenizer
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
            raise ValueError(
                f"{where}: the adapter has {key}={have!r}, but policy.lora.{name} is {want!r}; make them agree"
            )


def _check_layers(settings: PolicySettings, model: PeftModel) -> None:
    """The adapter covers the layers `policy.lora.last_layers` names (they decide where the backward pass stops)."""
    config = model.peft_config["default"]
    if not isinstance(config, LoraConfig):
        raise ValueError(
            f"field 'policy.init_adapter': a {type(config).__name__} adapter, not the LoRA adapter it must be"
        )
    saved = config.layers_to_transform
    want = top_layers(model, settings.lora.last_layers)
    have = None if saved is None else sorted([saved] if isinstance(saved, int) else saved)
    if have != want:
        raise ValueError(
            f"field 'policy.init_adapter' ({str(settings.init_adapter)!r}): the adapter adapts layers "
            f"{have or 'all'}, but policy.lora.last_layers={settings.lora.last_layers} means {want or 'all'}; "
            "make them agree"
        )
