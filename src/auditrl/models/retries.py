"""Bounded, visible model calls: the attempt loop every role shares, retry notices, the failure reason.

inspect-ai retries transient failures (429 with its Retry-After, 5xx, dropped connections, attempts
that time out) itself, with exponential backoff, within the config's limits (`auditrl.models.limits`);
`call_model` adds the failures inspect-ai does not retry (an unparseable body, an empty answer) within
the same time bound.

inspect-ai reports each retry to its hooks; `retry_notices` routes them to a callback (a command's
progress display) for the duration of a `with` block.
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from inspect_ai.hooks import Hooks, ModelRetry, hooks
from inspect_ai.model import ChatMessage, GenerateConfig, Model, ModelOutput
from inspect_ai.tool import ToolChoice, ToolInfo
from pydantic_core import PydanticSerializationError
from tenacity import RetryError

from auditrl.models.secrets import redact
from auditrl.safe_text import clean_strings
from auditrl.terminal import calling


class ModelCallFailed(RuntimeError):
    """A model call failed on every attempt; the message says why, in one line.

    `exhausted` is True when the call's limits were spent (inspect-ai gave up retrying, or the timeout
    passed), so that calling again at once would only repeat the wait.
    """

    def __init__(self, message: str, *, exhausted: bool) -> None:
        super().__init__(message)
        self.exhausted = exhausted


_STYLE_TAG = re.compile(r"\[/?[a-z][a-z ]*\]")
"""rich style tags such as [bold] that inspect-ai puts in its error messages (not "[Errno 111]")."""


def describe_error(exc: BaseException) -> str:
    """An exception as one plain line, secrets redacted: its type and message (the last attempt's, for a RetryError).

    A server may quote the key it was sent (a 401 naming the "incorrect API key"), so the line never holds it.
    """
    if isinstance(exc, RetryError) and exc.last_attempt.failed:
        exc = exc.last_attempt.exception() or exc
    text = redact(" ".join(_STYLE_TAG.sub("", str(exc)).split()))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def valid_unicode(output: ModelOutput) -> ModelOutput:
    """`output` with text no UTF-8 file or request can carry (a lone surrogate: half an emoji, cut off by a
    proxy at max_tokens) replaced by U+FFFD, so the audit goes on and its transcript can be stored."""
    try:
        output.model_dump_json()
    except PydanticSerializationError:
        return ModelOutput.model_validate(clean_strings(output.model_dump()))
    return output


@dataclass(frozen=True)
class RetryNotice:
    """One retry inspect-ai is about to make: which model, which attempt failed, why, and the wait."""

    model: str
    attempt: int
    wait_s: float
    reason: str

    def describe(self) -> str:
        return f"{self.model}: attempt {self.attempt} failed ({self.reason}); retrying in {self.wait_s:.0f} s"


RetryListener = Callable[[RetryNotice], None]
_listener: ContextVar[RetryListener | None] = ContextVar("auditrl_retry_listener", default=None)


def _reason(data: ModelRetry) -> str:
    if data.status_code == 429:
        return "rate limited (429)"
    kind = data.exception_type or "error"
    return f"{kind}, HTTP {data.status_code}" if data.status_code else kind


class RetryNoticeHook(Hooks):
    """Forwards inspect-ai's retry events to the listener of the current context, if any."""

    def enabled(self) -> bool:
        return _listener.get() is not None

    async def on_model_retry(self, data: ModelRetry) -> None:
        listener = _listener.get()
        if listener is not None:
            listener(RetryNotice(data.model_name, data.attempt, data.wait_time, _reason(data)))


@functools.cache
def _register_hook() -> None:
    """Register the hook on first use: inspect-ai prints a banner at start-up when any hook is registered."""
    hooks(name="auditrl_retry_notices", description="Shows auditrl commands each model retry as it happens.")(
        RetryNoticeHook
    )


@contextmanager
def retry_notices(listener: RetryListener) -> Iterator[None]:
    """Send every model retry made in this context (and tasks started from it) to `listener`."""
    _register_hook()
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


async def call_model(
    model: Model,
    input: list[ChatMessage],
    *,
    config: GenerateConfig,
    tools: list[ToolInfo] | None = None,
    tool_choice: ToolChoice | None = None,
    attempts: int = 3,
    role: str = "model",
) -> ModelOutput:
    """Generate, trying again on errors and empty answers while `attempts` and the timeout allow.

    inspect-ai has already retried transient errors inside each attempt; the attempts here cover what
    it does not retry. The timeout (`config`'s, else the model's own) is a hard bound on the whole
    call, because inspect-ai checks it only between its retries and may sleep past it. Raises ModelCallFailed with the role, the
    model and the last reason.
    """
    start = time.monotonic()
    timeout = config.timeout if config.timeout is not None else model.config.timeout
    deadline = start + timeout if timeout is not None else None
    retries: list[RetryNotice] = []
    outer = _listener.get()

    def note(notice: RetryNotice) -> None:
        retries.append(notice)
        if outer is not None:
            outer(notice)

    last = "no attempt made"
    tried = 0
    exhausted = False
    with retry_notices(note), calling(role):
        while tried < max(1, attempts):
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                exhausted = True
                break
            tried += 1
            try:
                async with asyncio.timeout(remaining):
                    output = await model.generate(
                        input=input, tools=tools or [], tool_choice=tool_choice, config=config
                    )
            except TimeoutError:
                last = f"no answer within the {timeout} s timeout"
                if retries:
                    last += f" (last error: {retries[-1].reason})"
                exhausted = True
                break
            except RetryError as exc:  # inspect-ai spent the call's retries already
                last = describe_error(exc)
                exhausted = True
                break
            except Exception as exc:  # noqa: BLE001 - any provider error is retried, then reported
                last = describe_error(exc)
                continue
            if not output.empty:
                return valid_unicode(output)
            last = f"the model returned no choices{f' ({output.error})' if output.error else ''}"
    elapsed = time.monotonic() - start
    tries = tried + len(retries)
    raise ModelCallFailed(f"{role} model {model} failed after {tries} tries in {elapsed:.0f} s: {last}", exhausted=exhausted)
