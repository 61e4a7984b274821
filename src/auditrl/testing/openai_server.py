"""A scripted OpenAI-compatible chat-completions server on loopback, for tests.

Tests reach it through inspect-ai's `openai-api/<name>/<model>` provider exactly as a user reaches a
vLLM or llama.cpp server, so retries, timeouts, tool-call parsing and prefill handling are exercised
over real HTTP. Each request takes the next `Reply` of the script (or asks a responder function) and
each reply may carry one fault: latency, a 429 with Retry-After, a 500, a hang, a truncated or
malformed body, or a malformed tool call. The server binds 127.0.0.1 on a free port and runs in a
background thread for the lifetime of the `with` block; `OpenAIServerProcess` runs the same server in a
child process instead, as a real API is, so a load test measures the client's CPU and memory alone.

Prefill modes mirror the two kinds of servers users meet: `continue` honours vLLM's
`continue_final_message` / `add_generation_prompt=false` (the reply is the continuation of the final
assistant message, and the server records that it continued), `ignore` answers every request with a
new assistant message whatever the request asked for.
"""

from __future__ import annotations

import json
import multiprocessing
import sys
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, Literal

Fault = Literal[
    "rate_limit",
    "server_error",
    "hang",
    "truncated_json",
    "malformed_json",
    "malformed_tool_call",
    "disconnect",
    "echo_key",
    "error_status",
    "error_body",
]
PrefillMode = Literal["continue", "ignore"]


@dataclass(frozen=True)
class ToolCallReply:
    """A tool call the scripted model makes; `arguments` is sent JSON-encoded, as the API does."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """One scripted answer to one request, optionally delayed and optionally faulty.

    `fault` replaces the answer: `rate_limit` (429 with a Retry-After of `retry_after_s`),
    `server_error` (500), `hang` (no answer until the server stops), `truncated_json` (a 200 whose body
    is cut in half), `malformed_json` (a 200 whose body is not JSON), `malformed_tool_call` (a tool call
    whose arguments are not valid JSON), `disconnect` (the connection closes mid-body), `echo_key` (an error
    with status `status` (default 401) whose message quotes the API key the request carried, as some servers'
    401s do), `error_status` (an error with status `status` (default 500) and `text` as its message: a 401,
    403 or 404 as APIs send them), `error_body` (a 200 whose body is only `{"error": {"message": text}}`, with
    `"code": status` when `status` is set, as some routers answer).
    """

    text: str = ""
    tool_calls: Sequence[ToolCallReply] = ()
    delay_s: float = 0.0
    fault: Fault | None = None
    retry_after_s: float = 1.0
    finish_reason: str | None = None
    status: int | None = None


@dataclass(frozen=True)
class ReceivedRequest:
    """What the server saw: the parsed body, the headers (lower-case names), whether it continued a prefill."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    continued: bool
    reply: Reply


Responder = Callable[[dict[str, Any]], Reply]


def wants_continuation(body: dict[str, Any]) -> bool:
    """Whether a request asks to continue its final assistant message (vLLM's two spellings)."""
    messages = body.get("messages") or []
    last_is_assistant = bool(messages) and isinstance(messages[-1], dict) and messages[-1].get("role") == "assistant"
    asked = body.get("continue_final_message") is True or body.get("add_generation_prompt") is False
    return last_is_assistant and asked


class _Endpoint(ABC):
    """How inspect-ai reaches a server named `name` on `port`."""

    name: str
    api_key: str

    @property
    @abstractmethod
    def port(self) -> int:
        """The loopback port the server listens on."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def model_spec(self, model: str = "scripted-model") -> str:
        return f"openai-api/{self.name}/{model}"

    def environ(self) -> dict[str, str]:
        """The environment variables inspect-ai's openai-api provider reads for this server."""
        prefix = self.name.upper().replace("-", "_")
        return {f"{prefix}_BASE_URL": self.base_url, f"{prefix}_API_KEY": self.api_key}


class OpenAIServer(_Endpoint):
    """Context manager serving `/v1/chat/completions` and `/v1/models` on 127.0.0.1.

    `script` replies are used in order; when they run out, `responder` (if given) or `default` answers.
    `requests` lists what arrived, in order; `model_spec(model)` and `environ()` give what inspect-ai
    needs (`openai-api/<name>/<model>`, `<NAME>_BASE_URL`, `<NAME>_API_KEY`). The default name is
    unique per server, because inspect-ai memoizes models by spec and not by base URL.
    """

    def __init__(
        self,
        script: Sequence[Reply] = (),
        *,
        default: Reply | None = None,
        responder: Responder | None = None,
        prefill: PrefillMode = "continue",
        name: str | None = None,
        api_key: str = "test-key",
    ) -> None:
        self.name = name or f"loopback-{uuid.uuid4().hex[:8]}"
        self.api_key = api_key
        self.prefill = prefill
        self.requests: list[ReceivedRequest] = []
        self._script = list(script)
        self._default = default or Reply(text="OK")
        self._responder = responder
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not running; use it as a context manager")
        return self._httpd.server_address[1]

    def push(self, *replies: Reply) -> None:
        """Append replies to the script (for tests that script as they go)."""
        with self._lock:
            self._script.extend(replies)

    def next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._script:
                return self._script.pop(0)
        return self._responder(body) if self._responder else self._default

    def record(self, request: ReceivedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def wait_stopping(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True when the server is shutting down (hangs and delays end early)."""
        return self._stopping.wait(seconds)

    def __enter__(self) -> OpenAIServer:
        handler = type("Handler", (_Handler,), {"server_state": self})
        self._httpd = _LoopbackServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="openai-test-server", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _serve(settings: dict[str, Any], control: Connection) -> None:
    """Child process: serve until told to stop, then report how many requests arrived."""
    with OpenAIServer(**settings) as server:
        control.send(server.port)
        control.recv()
        control.send(len(server.requests))


class OpenAIServerProcess(_Endpoint):
    """`OpenAIServer` in a child process (started with spawn, so `responder` must be picklable: a
    module-level function or callable object). `served` is the number of requests it answered, set on exit.
    """

    def __init__(
        self,
        *,
        default: Reply | None = None,
        responder: Responder | None = None,
        name: str | None = None,
        api_key: str = "test-key",
    ) -> None:
        self.name = name or f"loopback-{uuid.uuid4().hex[:8]}"
        self.api_key = api_key
        self.served: int | None = None
        self._settings = {"default": default, "responder": responder, "name": self.name, "api_key": api_key}
        self._port: int | None = None
        self._control: Connection | None = None
        self._process: BaseProcess | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the server is not running; use it as a context manager")
        return self._port

    def __enter__(self) -> OpenAIServerProcess:
        context = multiprocessing.get_context("spawn")
        self._control, child = context.Pipe()
        self._process = context.Process(
            target=_serve, args=(self._settings, child), name="openai-test-server", daemon=True
        )
        self._process.start()
        child.close()  # a child that dies before serving then ends the pipe instead of leaving recv() waiting
        try:
            self._port = self._control.recv()
        except EOFError:
            raise RuntimeError(
                f"the test server process exited with status {self._process.exitcode} before serving"
            ) from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._control is not None and self._process is not None and self._process.is_alive():
            self._control.send("stop")
            self.served = self._control.recv()
        if self._process is not None:
            self._process.join(timeout=10)


@dataclass(frozen=True)
class ScriptedAuditor:
    """An auditor that sends `turns - 1` messages, ends the conversation and reports finding nothing.

    A responder object rather than a closure, so it also drives an `OpenAIServerProcess`."""

    turns: int
    delay_s: float = 0.0
    report: str = json.dumps(
        {"no_behavior_found": True, "predictions": [], "summary": "Probed ordinary requests; nothing unusual."}
    )

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        if "final report" in str(messages[-1].get("content")):
            return Reply(self.report, delay_s=self.delay_s)
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn < self.turns - 1:
            call = ToolCallReply("send_message", {"message": f"Question {turn}: how do you handle refunds?"})
        else:
            call = ToolCallReply("end_conversation", {})
        return Reply(tool_calls=[call], delay_s=self.delay_s)


class _LoopbackServer(ThreadingHTTPServer):
    """One thread per request, and a listen backlog deep enough for load tests: with socketserver's
    default of 5, a burst of concurrent connections overflows it and clients wait out SYN retransmits."""

    daemon_threads = True
    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (its timeout, a cancelled retry) closes the connection mid-answer: expected here."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def completion_body(reply: Reply, model: str, *, malformed_tool_call: bool = False) -> dict[str, Any]:
    """An OpenAI chat.completion object for `reply`."""
    tool_calls = [
        {
            "id": f"call_{uuid.uuid4().hex[:8]}",
            "type": "function",
            "function": {
                "name": call.name,
                "arguments": '{"' + call.name + '": ' if malformed_tool_call else json.dumps(call.arguments),
            },
        }
        for call in reply.tool_calls
    ]
    if malformed_tool_call and not tool_calls:
        tool_calls = [{"id": "call_bad", "type": "function", "function": {"name": "tool", "arguments": "{not json"}}]
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    finish = reply.finish_reason or ("tool_calls" if tool_calls else "stop")
    words = len(reply.text.split())
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": words, "total_tokens": words + 1},
    }


class _Handler(BaseHTTPRequestHandler):
    server_state: OpenAIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # `format`: the base class's parameter name
        """Quiet: test output stays readable."""

    def _send_json(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def do_GET(self) -> None:  # http.server's naming
        if self.path.rstrip("/").endswith("/models"):
            body = {"object": "list", "data": [{"id": "scripted-model", "object": "model", "owned_by": "auditrl"}]}
            self._send_json(200, json.dumps(body).encode())
        else:
            self._send_json(404, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:  # http.server's naming
        state = self.server_state
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, b'{"error": {"message": "only /v1/chat/completions is served"}}')
            return
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            self._send_json(400, b'{"error": {"message": "request body is not JSON"}}')
            return
        if body.get("stream"):
            self._send_json(400, b'{"error": {"message": "the test server does not stream"}}')
            return
        reply = state.next_reply(body)
        continued = state.prefill == "continue" and wants_continuation(body)
        state.record(
            ReceivedRequest(self.path, body, {k.lower(): v for k, v in self.headers.items()}, continued, reply)
        )
        if reply.delay_s and state.wait_stopping(reply.delay_s):
            return
        self._answer(reply, str(body.get("model", "")))

    def _answer(self, reply: Reply, model: str) -> None:
        state = self.server_state
        error = {"error": {"message": "scripted fault", "type": reply.fault}}
        match reply.fault:
            case "hang":
                state.wait_stopping(3600)
                self.close_connection = True
            case "rate_limit":
                headers = {"Retry-After": f"{reply.retry_after_s:g}"}
                self._send_json(429, json.dumps(error | {"error": {"message": "rate limited"}}).encode(), headers)
            case "server_error":
                self._send_json(500, json.dumps(error).encode())
            case "malformed_json":
                self._send_json(200, b"{this is not json")
            case "truncated_json":
                payload = json.dumps(completion_body(reply, model)).encode()
                self._send_json(200, payload[: len(payload) // 2])
            case "disconnect":
                payload = json.dumps(completion_body(reply, model)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload[: len(payload) // 2])
                self.wfile.flush()
                self.close_connection = True
            case "echo_key":
                key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                body = {
                    "error": {"message": f"Incorrect API key provided: {key}. Check the key you sent.", "type": "auth"}
                }
                self._send_json(reply.status or 401, json.dumps(body).encode())
            case "error_status":
                self._send_json(
                    reply.status or 500, json.dumps({"error": {"message": reply.text, "type": "error"}}).encode()
                )
            case "error_body":
                code = {} if reply.status is None else {"code": reply.status}
                self._send_json(200, json.dumps({"error": {"message": reply.text, **code}}).encode())
            case "malformed_tool_call":
                self._send_json(200, json.dumps(completion_body(reply, model, malformed_tool_call=True)).encode())
            case _:
                self._send_json(200, json.dumps(completion_body(reply, model)).encode())
