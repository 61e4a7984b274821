"""Bounded, visible model calls: the attempt loop every role shares, retry notices, the failure reason.

inspect-ai retries transient failures (429 with its Retry-After, 5xx, dropped connections, attempts
that time out) itself, with exponential backoff, within the config's limits (`auditrl.models.limits`);
`call_model` adds the failures inspect-ai does not retry (an unparseable body, an empty answer) within
the same time bound.

inspect-ai reports each retry to its hooks; `retry_notices` routes them to a callback (a command's
progress display) for the duration of a `with` block.

Some failures no retry can mend: the key is refused (401/403), the model does not exist (404), the
package or weights a local model needs are missing. Those end the call at once and mark the model as
refused for the rest of the process (the run), so that no later audit calls it again; each later call
fails at once with the same line, which names the fix. Every message counts the calls actually made.
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
from typing import NamedTuple

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
    passed) or the model is refused, so that calling again at once would only repeat the wait or the
    refusal. `calls` is how many requests were made; `reason` is the last one's failure.
    """

    def __init__(self, message: str, *, exhausted: bool, calls: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.exhausted = exhausted
        self.calls = calls
        self.reason = reason or message


class Refusal(NamedTuple):
    """Why a model can never answer in this run, and what the user must change."""

    reason: str
    fix: str

    def describe(self) -> str:
        return f"{self.reason}; fix: {self.fix}"


AUTH_STATUSES = frozenset({401, 403})
"""The provider refused the credentials or the permission: the same key is refused again."""
NOT_FOUND = 404
_refused: dict[str, Refusal] = {}
"""Models refused in this process, by spec: later calls fail at once instead of asking again."""


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


def status_code(exc: BaseException) -> int | None:
    """The HTTP status a provider SDK's error carries (`status_code`, or `code` for some SDKs), if any."""
    for name in ("status_code", "code"):
        value = getattr(exc, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


def provider_message(exc: BaseException) -> str | None:
    """The message a provider put in its error body (`{"error": {"message": ...}}`, or `{"message": ...}`)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    message = body.get("message") if isinstance(body, dict) else None
    return " ".join(message.split()) if isinstance(message, str) and message.strip() else None


def describe_failure(exc: BaseException) -> str:
    """A provider error as one line: the provider's own message with its status, else `describe_error`."""
    if isinstance(exc, RetryError) and exc.last_attempt.failed:
        exc = exc.last_attempt.exception() or exc
    message = provider_message(exc)
    if message is None:
        return describe_error(exc)
    status = status_code(exc)
    return redact(f"{message} (HTTP {status})" if status is not None else message)


def refusal(exc: BaseException, spec: str) -> Refusal | None:
    """The refusal an error stands for, None when trying again could succeed."""
    status = status_code(exc)
    reason = describe_failure(exc)
    if status in AUTH_STATUSES:
        return Refusal(
            f"the provider refused the credentials or permission ({reason})",
            f"check the key for {spec} (`auditrl models check {spec}`)",
        )
    if status == NOT_FOUND:
        return Refusal(f"the provider does not know this model ({reason})", f"check the model name in {spec}")
    if isinstance(exc, (ImportError, FileNotFoundError)):
        return Refusal(reason, f"install what {spec} needs (`auditrl models check {spec}`)")
    return None


def refused(spec: str) -> Refusal | None:
    """Why `spec` was refused earlier in this process, if it was."""
    return _refused.get(spec)


def forget_refusals() -> None:
    """Let refused models be called again (a new run in the same process, or a test)."""
    _refused.clear()


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
    call, because inspect-ai checks it only between its retries and may sleep past it. A refusal (see
    the module's docstring) ends the call at once. Raises ModelCallFailed with the role, the model,
    the calls made and the last reason.
    """
    start = time.monotonic()
    spec = str(model)
    if (earlier := refused(spec)) is not None:
        message = f"{role} model {spec} is refused for this run: {earlier.describe()}"
        raise ModelCallFailed(message, exhausted=True, reason=earlier.describe())
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
                last = describe_failure(exc)
                exhausted = True
                break
            except Exception as exc:  # noqa: BLE001 - any provider error is retried (unless refused), then reported
                found = refusal(exc, spec)
                if found is not None:
                    _refused[spec] = found
                    last = found.describe()
                    exhausted = True
                    break
                last = describe_failure(exc)
                continue
            if not output.empty:
                return valid_unicode(output)
            last = f"the model returned no choices{f' ({output.error})' if output.error else ''}"
    elapsed = time.monotonic() - start
    calls = tried + len(retries)
    raise ModelCallFailed(
        f"{role} model {spec} failed after {plural(calls, 'call')} in {elapsed:.0f} s: {last}",
        exhausted=exhausted,
        calls=calls,
        reason=last,
    )


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
