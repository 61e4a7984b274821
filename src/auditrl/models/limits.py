"""Limits of one model call (retries, seconds), shared by every role, command and training config.

inspect-ai retries transient failures for as long as `GenerateConfig.max_retries` and `timeout` allow;
left unset, it retries for hours, so a dead endpoint looks like a hung command. These defaults end a
dead endpoint in about a minute.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from auditrl.configfile import ConfigModel

if TYPE_CHECKING:
    from inspect_ai.model import GenerateConfig

DEFAULT_MAX_RETRIES = 3
DEFAULT_TIMEOUT_S = 60


class CallLimits(ConfigModel):
    """How long one model call may take before it is recorded as failed (every role, every command)."""

    max_retries: int = Field(
        default=DEFAULT_MAX_RETRIES,
        ge=0,
        description="Retries of a failed model call (rate limits, server errors, lost connections, timeouts).",
    )
    timeout: int = Field(
        default=DEFAULT_TIMEOUT_S,
        ge=1,
        description="Seconds one model call may take, retries and their waits included; also each attempt's limit.",
    )

    def generate_config(self, **fields: Any) -> GenerateConfig:
        """A GenerateConfig carrying these limits (plus any other GenerateConfig fields)."""
        from inspect_ai.model import GenerateConfig

        return GenerateConfig(
            max_retries=self.max_retries, timeout=self.timeout, attempt_timeout=self.timeout, **fields
        )
