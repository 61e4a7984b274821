"""Role resolution: provider prefixes, clear errors, tool protocols, no credentials in args."""

from __future__ import annotations

import pytest
from inspect_ai.model import GenerateConfig, Model

from auditrl.models.roles import UnknownModelError, resolve_model, supported_providers, tool_protocol_for


def test_our_providers_are_registered_next_to_inspect_builtins() -> None:
    providers = supported_providers()
    assert {"local", "scripted", "sim", "openai", "anthropic", "vllm", "ollama", "openai-api"} <= set(providers)


async def test_resolve_scripted_model_with_args_and_config() -> None:
    model = resolve_model("scripted/echo", config=GenerateConfig(max_tokens=5), replies=["pong"])
    assert isinstance(model, Model)
    assert (await model.generate("ping")).completion == "pong"


def test_unknown_provider_lists_supported_prefixes() -> None:
    with pytest.raises(UnknownModelError, match=r"unknown model provider 'nosuch'.*local.*openai.*scripted"):
        resolve_model("nosuch/model")


@pytest.mark.parametrize("spec", ["gpt-4o", "local/", "/smollm2", ""])
def test_spec_without_provider_is_rejected(spec: str) -> None:
    with pytest.raises(UnknownModelError, match="<provider>/<model>"):
        resolve_model(spec)


def test_credentials_are_never_model_args() -> None:
    with pytest.raises(ValueError, match="environment variable"):
        resolve_model("scripted/denier", api_key="sk-not-a-real-key")


def test_tool_protocol_by_provider_and_override() -> None:
    assert tool_protocol_for("local/smollm2") == "text"
    assert tool_protocol_for("scripted/auditor") == "text"
    assert tool_protocol_for("openai-api/together/meta-llama/Llama-3-70b") == "native"
    assert tool_protocol_for("anthropic/claude-sonnet-4-0") == "native"
    assert tool_protocol_for("vllm/Qwen/Qwen3-8B", override="text") == "text"
