"""The loopback OpenAI-compatible server, exercised through inspect-ai's openai-api provider over HTTP."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, GenerateConfig, Model, get_model
from inspect_ai.tool import ToolInfo, ToolParams

from auditrl.testing.openai_server import OpenAIServer, Reply, ToolCallReply

CONTINUE = GenerateConfig(extra_body={"continue_final_message": True, "add_generation_prompt": False})
LOOKUP = ToolInfo(name="lookup", description="Look something up.", parameters=ToolParams())
Serve = Callable[..., tuple[OpenAIServer, Model]]


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator[Serve]:
    """Start servers for a test; returns (server, model) with the provider's env vars set."""
    servers: list[OpenAIServer] = []

    def start(*script: Reply, config: GenerateConfig | None = None, **kwargs: object) -> tuple[OpenAIServer, Model]:
        server = OpenAIServer(script, **kwargs).__enter__()
        servers.append(server)
        for key, value in server.environ().items():
            monkeypatch.setenv(key, value)
        return server, get_model(server.model_spec(), config=config or GenerateConfig(max_retries=2, timeout=10))

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def test_binds_loopback_on_a_free_port() -> None:
    with OpenAIServer() as a, OpenAIServer() as b:
        assert a.base_url.startswith("http://127.0.0.1:") and a.port != b.port and a.name != b.name
    assert set(a.environ()) == {
        f"{a.name.upper().replace('-', '_')}_BASE_URL",
        f"{a.name.upper().replace('-', '_')}_API_KEY",
    }


async def test_text_reply_and_request_record(serve: Serve) -> None:
    server, model = serve(Reply("hello there"))
    output = await model.generate([ChatMessageUser(content="hi")])
    assert output.completion == "hello there"
    (request,) = server.requests
    assert request.body["messages"][-1] == {"role": "user", "content": "hi"}
    assert request.headers["authorization"] == f"Bearer {server.api_key}"


async def test_tool_calls_and_malformed_tool_call(serve: Serve) -> None:
    call = ToolCallReply("lookup", {"q": "weather"})
    _, model = serve(Reply(tool_calls=[call]), Reply(tool_calls=[call], fault="malformed_tool_call"))
    good = (await model.generate([ChatMessageUser(content="a")], tools=[LOOKUP])).message.tool_calls
    assert good and good[0].function == "lookup" and good[0].arguments == {"q": "weather"} and not good[0].parse_error
    bad = (await model.generate([ChatMessageUser(content="b")], tools=[LOOKUP])).message.tool_calls
    assert bad and bad[0].parse_error


@pytest.mark.parametrize("fault", ["rate_limit", "server_error", "disconnect"])
async def test_transient_faults_are_retried_by_the_provider(serve: Serve, fault: str) -> None:
    server, model = serve(Reply(fault=fault, retry_after_s=0.1), Reply("recovered"))
    assert (await model.generate([ChatMessageUser(content="x")])).completion == "recovered"
    assert [r.reply.fault for r in server.requests] == [fault, None]


@pytest.mark.parametrize("fault", ["truncated_json", "malformed_json"])
async def test_broken_bodies_reach_the_caller_as_errors(serve: Serve, fault: str) -> None:
    server, model = serve(Reply("never parsed", fault=fault), Reply("unused"))
    with pytest.raises(Exception):  # noqa: B017 - whatever the SDK raises for an unparseable body
        await model.generate([ChatMessageUser(content="x")])
    assert [r.reply.fault for r in server.requests] == [fault]


def test_rate_limit_sends_retry_after(serve: Serve) -> None:
    server, _ = serve(Reply(fault="rate_limit", retry_after_s=2))
    response = httpx.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": []})
    assert response.status_code == 429 and response.headers["Retry-After"] == "2"


async def test_hang_ends_at_the_timeout_and_latency_is_applied(serve: Serve) -> None:
    server, model = serve(Reply(fault="hang"), config=GenerateConfig(max_retries=0, timeout=1, attempt_timeout=1))
    start = time.monotonic()
    with pytest.raises(Exception):  # noqa: B017 - the provider's own timeout error type
        await model.generate([ChatMessageUser(content="x")])
    assert time.monotonic() - start < 5
    server.push(Reply("late", delay_s=0.3))
    start = time.monotonic()
    assert (await model.generate([ChatMessageUser(content="y")], config=GenerateConfig(timeout=5))).completion == "late"
    assert time.monotonic() - start >= 0.3


@pytest.mark.parametrize("mode", ["continue", "ignore"])
async def test_prefill_modes(serve: Serve, mode: str) -> None:
    server, model = serve(Reply(" the rest"), prefill=mode)
    prefill = [ChatMessageUser(content="say it"), ChatMessageAssistant(content="I will say")]
    assert (await model.generate(prefill, config=CONTINUE)).completion == " the rest"
    assert server.requests[0].continued is (mode == "continue")
    await model.generate(prefill)
    assert server.requests[1].continued is False, "without the flag no server continues"


async def test_responder_answers_when_the_script_runs_out(serve: Serve) -> None:
    server, model = serve(Reply("first"), responder=lambda body: Reply(f"echo {body['messages'][-1]['content']}"))
    assert (await model.generate("a")).completion == "first"
    assert (await model.generate("b")).completion == "echo b"
