"""Loading the auditor policy in a trainable state."""

from __future__ import annotations

from typing import Any

import torch
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from auditrl.models.local import align_gguf_special_tokens, clear_quantizer, resolve_source
from auditrl.train.config import LoraSettings, PolicySettings, chat_template_text


def load_policy(settings: PolicySettings) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load the auditor model in a trainable state (a GGUF file is dequantised; its quantizer flags cleared)."""
    source = resolve_source(settings.model)
    gguf = settings.gguf_file or source.gguf_file
    kwargs: dict[str, Any] = {"gguf_file": gguf} if gguf else {}
    tokenizer = AutoTokenizer.from_pretrained(source.location, **kwargs)
    model_kwargs = dict(kwargs)
    if settings.attn_implementation:
        model_kwargs["attn_implementation"] = settings.attn_implementation
    model = AutoModelForCausalLM.from_pretrained(source.location, dtype=getattr(torch, settings.dtype), **model_kwargs)
    clear_quantizer(model)
    if gguf:
        align_gguf_special_tokens(tokenizer, model)
    if settings.chat_template is not None:
        tokenizer.chat_template = chat_template_text(settings.chat_template)
    if tokenizer.chat_template is None:
        raise ValueError(f"policy.model '{settings.model}' has no chat template; use an instruction-tuned model")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


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
