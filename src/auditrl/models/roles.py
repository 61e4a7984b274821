"""Resolve a role (auditor, target, judge, realism) from a model spec string to an inspect-ai `Model`.

Every model goes through inspect-ai's model API, so any provider it supports works (`openai/...`,
`anthropic/...`, `google/...`, `vllm/...`, `ollama/...`, `openai-api/<name>/<model>`), next to the
in-process providers registered by this package (`local/...`, `scripted/...`, `sim/...`). API keys are
read from the environment by inspect-ai (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...); this module never
accepts, logs or stores them.
"""

from __future__ import annotations

from typing import Any

from inspect_ai._util.registry import registry_find, registry_unqualified_name
from inspect_ai.model import GenerateConfig, Model, get_model

import auditrl.providers  # noqa: F401 - registers local/, scripted/, sim/ without the entry point
from auditrl.models.capabilities import provider_info
from auditrl.models.error_bodies import watch_error_bodies
from auditrl.models.limits import CallLimits
from auditrl.models.secrets import check_no_secret_args
from auditrl.scaffold.tool_sets import ToolProtocol


class UnknownModelError(ValueError):
    """A model spec whose provider inspect-ai does not know (or that is not `<provider>/<model>`)."""


def supported_providers() -> list[str]:
    """Names of every provider registered with inspect-ai (built-in and from extension packages)."""
    found = registry_find(lambda info: info.type == "modelapi")
    return sorted({registry_unqualified_name(api) for api in found})


def provider_of(spec: str) -> str:
    """The provider prefix of `spec`; raises UnknownModelError when the spec has none."""
    provider, sep, model = spec.partition("/")
    if not sep or not provider or not model:
        raise UnknownModelError(
            f"model spec {spec!r} must look like <provider>/<model> (e.g. local/smollm2, openai/gpt-4o); "
            f"supported providers: {', '.join(supported_providers())}"
        )
    return provider


def resolve_model(
    spec: str, config: GenerateConfig | None = None, limits: CallLimits | None = None, **model_args: Any
) -> Model:
    """The inspect-ai `Model` for `spec`, with an error listing the supported providers if it is unknown.

    Models reached over the network carry call limits (`limits`, else the defaults) in their config, so
    that no role retries for ever; fields set in `config` win. In-process models take none: they have
    no connection to lose, and a CPU may need minutes for one long reply.
    """
    provider = provider_of(spec)
    known = supported_providers()
    if provider not in known:
        raise UnknownModelError(
            f"unknown model provider {provider!r} in {spec!r}; supported providers: {', '.join(known)}"
        )
    check_no_secret_args(model_args, f"model args for {spec!r} ")
    info = provider_info(provider)
    if (
        info.sdk_retries
    ):  # the SDK would retry silently (twice, by default): every retry is inspect-ai's, bounded and shown
        model_args.setdefault("max_retries", 0)
    config = config or GenerateConfig()
    if not info.in_process:
        config = (limits or CallLimits()).generate_config().merge(config)
    return watch_error_bodies(get_model(spec, config=config, **model_args))


def tool_protocol_for(spec: str, override: ToolProtocol | None = None) -> ToolProtocol:
    """How a role calls tools: `override`, else its provider's (`text` for in-process models without tool calling)."""
    if override is not None:
        return override
    return provider_info(provider_of(spec)).tool_protocol
