"""Secret values never reach output: every secret variable the capability table names is redacted."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from auditrl.models.capabilities import provider_info, provider_table
from auditrl.models.secrets import REDACTED, check_no_secret_args, install_redaction, redact, secret_values


def test_every_key_a_provider_reads_is_redacted_and_nothing_else(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-0123456789")
    monkeypatch.setenv("MYSERVER_API_KEY", "served-key-abcdef")  # an openai-api/<name>/ service's key
    monkeypatch.setenv("MYSERVER_BASE_URL", "http://127.0.0.1:9/v1")  # a setting, not a secret
    monkeypatch.setenv("GROQ_API_KEY", "short")  # too short to be a key: redacting it would mangle text
    text = "401: key sk-ant-0123456789 rejected; served-key-abcdef at http://127.0.0.1:9/v1, short"
    assert redact(text) == f"401: key {REDACTED} rejected; {REDACTED} at http://127.0.0.1:9/v1, short"
    assert "http://127.0.0.1:9/v1" not in secret_values()


def test_log_records_and_console_lines_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-secret-value-1")
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stream)
    install_redaction()
    print("server said: Incorrect API key provided: sk-proj-secret-value-1")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("auditrl.test.secrets")
    logger.addHandler(handler)
    try:
        logger.warning("retrying after %s", "401 for sk-proj-secret-value-1")
    finally:
        logger.removeHandler(handler)
    assert stream.getvalue() == f"server said: Incorrect API key provided: {REDACTED}\n"
    assert records[0].getMessage() == f"retrying after 401 for {REDACTED}"


def test_credentials_in_model_args_are_refused() -> None:
    with pytest.raises(ValueError, match="may not carry credentials \\(api_key\\)"):
        check_no_secret_args({"api_key": "x", "base_url": "y"})


def test_the_capability_table_holds_what_the_provider_sets_held() -> None:
    assert {p for p, info in provider_table().items() if info.in_process} == {"local", "scripted", "sim"}
    assert {p for p, info in provider_table().items() if info.tool_protocol == "text"} == {"local", "scripted", "sim"}
    assert {p for p, info in provider_table().items() if info.sdk_retries} == {"openai", "openai-api", "anthropic"}
    continuing = {p for p, info in provider_table().items() if info.prefill == "continue"}
    assert continuing == {"local", "scripted", "sim", "anthropic", "mockllm"}
    assert {p for p, info in provider_table().items() if info.prefill == "continue_flag"} == {"vllm", "sglang"}
    assert provider_info("sim").family_targets and not provider_info("local").family_targets
    assert provider_info("someone-elses-provider").prefill == "emulate"
