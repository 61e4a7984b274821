"""`auditrl models check`, and the README's model strings resolving on a fresh install without network."""

from __future__ import annotations

import re
import socket
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from auditrl.cli import app
from auditrl.models.capabilities import provider_info
from auditrl.models.roles import provider_of, resolve_model
from auditrl.testing.openai_server import OpenAIServer, Reply

README = Path(__file__).resolve().parents[2] / "README.md"
DUMMY_ENV = {
    "OPENAI_API_KEY": "sk-dummy-openai",
    "ANTHROPIC_API_KEY": "sk-dummy-anthropic",
    "GOOGLE_API_KEY": "dummy-google",
    "TOGETHER_API_KEY": "dummy-together",
    "TOGETHER_BASE_URL": "http://127.0.0.1:9/v1",
    "VLLM_BASE_URL": "http://127.0.0.1:9/v1",
    "LLAMACPP_API_KEY": "dummy-llamacpp",
    "LLAMACPP_BASE_URL": "http://127.0.0.1:9/v1",
}
ROLE_OPTIONS = r"--(?:auditor|target|judge|realism-judge|production-target)"


def run_check(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["models", "check", *args], terminal_width=240)
    return result.exit_code, result.output


def readme_api_models() -> list[str]:
    """Every API model string given to a role option in the README's shell examples."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    specs = {m for block in blocks for m in re.findall(rf"{ROLE_OPTIONS}\s+([\w.-]+/[\w./-]+)", block)}
    return sorted(s for s in specs if not provider_info(provider_of(s)).in_process)


def test_the_readme_names_api_models() -> None:
    providers = {provider_of(s) for s in readme_api_models()}
    assert {"openai", "anthropic", "openai-api", "vllm"} <= providers


@pytest.mark.parametrize("spec", readme_api_models())
def test_every_readme_model_string_resolves_with_a_dummy_key(spec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in DUMMY_ENV.items():
        monkeypatch.setenv(key, value)
    assert resolve_model(spec) is not None
    code, output = run_check(spec)
    assert code == 0, output
    assert not any(value in output for value in DUMMY_ENV.values() if "dummy" in value), "key values are never shown"


def test_a_missing_sdk_and_a_missing_key_are_reported_with_fixes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret-value")
    code, output = run_check("anthropic/claude-sonnet-4-0", "openai/gpt-4o-mini")
    assert code == 1
    assert "SDK anthropic is not installed" in output and "pip install anthropic" in output
    assert "OPENAI_API_KEY is not set" in output and "export OPENAI_API_KEY=" in output
    assert "ANTHROPIC_API_KEY is set" in output and "sk-secret-value" not in output
    assert "2 problem(s) in 2 of 2 model(s)" in output


def test_protocols_and_prefill_support_are_stated() -> None:
    code, output = run_check("scripted/denier", "sim/steady", "nosuch/model")
    assert code == 1
    assert "tool protocol: text" in output and "prefill: continue (native)" in output
    assert "unknown model provider 'nosuch'" in output and "fix: use one of:" in output


def test_ping_reports_latency_and_a_dead_port_fails_within_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    monkeypatch.setenv("GONE_BASE_URL", f"http://127.0.0.1:{dead}/v1")
    monkeypatch.setenv("GONE_API_KEY", "dummy")
    with OpenAIServer([Reply("ok")]) as server:
        for key, value in server.environ().items():
            monkeypatch.setenv(key, value)
        code, output = run_check(
            server.model_spec(), "openai-api/gone/m", "--ping", "--max-retries", "0", "--timeout", "5"
        )
        assert server.requests[0].body["max_tokens"] == 1
    assert code == 1
    assert re.search(r"ok\s+ping: answered in \d+ ms", output)
    assert "FAIL ping model openai-api/gone/m failed" in output and "APIConnectionError" in output
