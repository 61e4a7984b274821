"""Bounded, visible model calls against real HTTP: a dead port, rate limits, hangs, broken bodies."""

from __future__ import annotations

import socket
import time

import pytest
from inspect_ai.model import ChatMessageUser

from auditrl.models.limits import CallLimits
from auditrl.models.retries import ModelCallFailed, RetryNotice, call_model, retry_notices
from auditrl.models.roles import resolve_model
from auditrl.testing.openai_server import OpenAIServer, Reply

HI = [ChatMessageUser(content="hi")]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_limits_reach_inspects_generate_config() -> None:
    config = CallLimits(max_retries=2, timeout=30).generate_config(max_tokens=7)
    assert (config.max_retries, config.timeout, config.attempt_timeout, config.max_tokens) == (2, 30, 30, 7)


@pytest.mark.slow
async def test_a_closed_port_fails_within_the_timeout_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEADPORT_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    monkeypatch.setenv("DEADPORT_API_KEY", "dummy")
    model = resolve_model("openai-api/deadport/m")
    notices: list[RetryNotice] = []
    start = time.monotonic()
    with retry_notices(notices.append), pytest.raises(ModelCallFailed) as failed:
        await call_model(model, HI, config=CallLimits(max_retries=1, timeout=4).generate_config(), role="target")
    assert time.monotonic() - start < 4.5, (
        "inspect-ai's backoff (3 s or more) after the first failure is cut at the timeout"
    )
    assert "target model openai-api/deadport/m failed" in str(failed.value)
    assert "APIConnectionError" in str(failed.value)
    assert notices and notices[0].reason == "APIConnectionError"


async def test_a_hang_ends_at_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIServer([Reply(fault="hang")]) as server:
        for key, value in server.environ().items():
            monkeypatch.setenv(key, value)
        start = time.monotonic()
        with pytest.raises(ModelCallFailed, match="failed after"):
            await call_model(resolve_model(server.model_spec()), HI, config=CallLimits(timeout=1).generate_config())
        assert time.monotonic() - start < 2.5


async def test_unparseable_bodies_are_tried_again_within_the_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIServer([Reply(fault="truncated_json"), Reply(fault="malformed_json"), Reply("third time")]) as server:
        for key, value in server.environ().items():
            monkeypatch.setenv(key, value)
        model = resolve_model(server.model_spec())
        output = await call_model(model, HI, config=CallLimits().generate_config(), attempts=3)
        assert output.completion == "third time"
        server.push(Reply(fault="malformed_json"), Reply(fault="malformed_json"))
        with pytest.raises(ModelCallFailed, match="after 2 calls"):
            await call_model(model, HI, config=CallLimits().generate_config(), attempts=2)


def serve(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in server.environ().items():
        monkeypatch.setenv(key, value)


async def test_an_error_body_is_reported_as_the_providers_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 200 that holds only an error is that error, retried by its status, and the message counts the calls made."""
    with OpenAIServer([Reply("upstream overloaded", fault="error_body")] * 2) as server:
        serve(server, monkeypatch)
        model = resolve_model(server.model_spec())
        with pytest.raises(ModelCallFailed) as failed:
            await call_model(model, HI, config=CallLimits(max_retries=1).generate_config(), attempts=1)
        assert "upstream overloaded" in str(failed.value)
        assert "TypeError" not in str(failed.value)
        assert failed.value.calls == len(server.requests) == 2
        assert f"after {len(server.requests)} calls" in str(failed.value)


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (Reply("Incorrect API key provided", fault="error_status", status=401), "refused the credentials"),
        (Reply("You lack access to this model", fault="error_status", status=403), "refused the credentials"),
        (Reply("The model `nope` does not exist", fault="error_status", status=404), "does not know this model"),
        (Reply("bad key", fault="error_body", status=401), "refused the credentials"),
    ],
)
async def test_a_refusal_is_not_retried_and_stops_later_calls(
    reply: Reply, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """401, 403 and 404 (also inside a 200's error body) end the call at once; later calls of the model make no
    request."""
    with OpenAIServer([reply] * 5) as server:
        serve(server, monkeypatch)
        model = resolve_model(server.model_spec())
        with pytest.raises(ModelCallFailed) as first:
            await call_model(model, HI, config=CallLimits(max_retries=2).generate_config(), attempts=3, role="target")
        made = len(server.requests)
        assert made == 1 and first.value.exhausted and first.value.calls == 1
        assert says in str(first.value) and "fix:" in str(first.value)
        with pytest.raises(ModelCallFailed, match="refused for this run") as second:
            await call_model(model, HI, config=CallLimits().generate_config(), role="target")
        assert len(server.requests) == made and second.value.calls == 0
