"""What each model provider can do and what it needs: one table (`data/providers.yaml`) for every reader.

Roles (tool protocol, call limits, SDK retries), prefills, `auditrl models check` and secret redaction
all look a provider up here, so adding a provider, or learning that one continues prefills, is one
entry in one file. Reading it needs neither inspect-ai nor a provider SDK.
"""

from __future__ import annotations

import functools
from importlib.resources import files
from typing import Literal

from pydantic import Field

from auditrl.configfile import ConfigModel, load_yaml
from auditrl.scaffold.tool_sets import ToolProtocol

PrefillHandling = Literal["continue", "continue_flag", "emulate"]
"""How a provider carries out a prefill (see auditrl.models.prefill)."""
SERVICE = "{NAME}"
"""Stands for the service of an `openai-api/<name>/<model>` spec in variable names."""


class ProviderInfo(ConfigModel):
    """One provider's entry; a provider missing from the table gets these defaults."""

    in_process: bool = Field(default=False, description="Runs in this process: no connection, SDK, key or call limits.")
    tool_protocol: ToolProtocol = Field(default="native", description="How its tool calls are written.")
    prefill: PrefillHandling = Field(default="emulate", description="How it carries out a prefill.")
    sdk_retries: bool = Field(default=False, description="Its SDK retries on its own unless told not to.")
    family_targets: bool = Field(default=False, description="The model name is an AuditWorld target family.")
    sdk: str | None = Field(default=None, description="Import name of the provider's SDK.")
    package: str | None = Field(default=None, description="The pip package that provides it.")
    keys: list[list[str]] = Field(
        default_factory=list, description="Secret variables, all required; any one name per line."
    )
    settings: list[list[str]] = Field(default_factory=list, description="Required variables that are not secret.")
    optional: list[str] = Field(default_factory=list, description="Variables reported when unset.")
    optional_note: str = Field(default="", description="What happens when an optional variable is unset.")


@functools.cache
def provider_table() -> dict[str, ProviderInfo]:
    """Every provider with an entry, by name."""
    raw = load_yaml(files("auditrl.models").joinpath("data/providers.yaml").read_text(encoding="utf-8"))
    return {name: ProviderInfo.model_validate(entry) for name, entry in raw.items()}


def provider_info(provider: str) -> ProviderInfo:
    """The entry of `provider` (the part of a model spec before the first `/`), defaults when it has none."""
    return provider_table().get(provider, ProviderInfo())


def key_variables() -> tuple[set[str], set[str]]:
    """The secret variables the table names: exact names, and suffixes of `{NAME}_...` templates (e.g. `_API_KEY`)."""
    names: set[str] = set()
    suffixes: set[str] = set()
    for info in provider_table().values():
        for alternatives in info.keys:
            for name in alternatives:
                if name.startswith(SERVICE):
                    suffixes.add(name.removeprefix(SERVICE))
                else:
                    names.add(name)
    return names, suffixes
