"""A provider that answers HTTP 200 with only an error body is reporting that error, not an empty completion.

Some OpenAI-compatible servers and routers answer a failed call with status 200 and a body such as
`{"error": {"message": "x", "code": 401}}`. The provider SDK parses that as a completion without choices,
and inspect-ai then fails on it with an unrelated `TypeError`. `watch_error_bodies` puts a response hook
on the SDK's HTTP client that gives such a response the status its error names (`code`, when it is an
HTTP error status, else 502: a bad answer from upstream), so the SDK raises its own status error with
the provider's message, and retrying follows the status as for any other error.
"""

from __future__ import annotations

import json
from typing import Any

from inspect_ai.model import Model

UPSTREAM_ERROR = 502
"""The status an error body gets when it names none: the server relayed a failure it did not explain."""
MAX_BODY_BYTES = 1_000_000
"""Larger bodies are completions, never a bare error object, and are not read ahead of the SDK."""
_HOOKED = "_auditrl_error_bodies"


def error_status(body: Any) -> int | None:
    """The status an error-only JSON body stands for, None when the body is not an error-only object."""
    if not isinstance(body, dict) or "error" not in body or body.get("choices") or body.get("content"):
        return None
    error = body["error"]
    code = error.get("code", error.get("status")) if isinstance(error, dict) else None
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        return code
    return UPSTREAM_ERROR


async def _give_error_status(response: Any) -> None:
    """httpx response hook: a 200 JSON body that holds only an error takes that error's status."""
    if response.status_code != 200 or "json" not in response.headers.get("content-type", ""):
        return
    length = response.headers.get("content-length")
    if length is None or not length.isdigit() or int(length) > MAX_BODY_BYTES:
        return
    await response.aread()
    try:
        body = json.loads(response.content)
    except ValueError:
        return  # an unparseable body is the SDK's to report, as before
    status = error_status(body)
    if status is not None:
        response.status_code = status


def watch_error_bodies(model: Model) -> Model:
    """`model` with the hook on its provider's HTTP client, where it has one (httpx-based SDKs); idempotent."""
    client = getattr(getattr(getattr(model, "api", None), "client", None), "_client", None)
    hooks = getattr(client, "event_hooks", None)
    if client is not None and isinstance(hooks, dict) and not getattr(client, _HOOKED, False):
        hooks.setdefault("response", []).append(_give_error_status)
        client.event_hooks = hooks
        setattr(client, _HOOKED, True)
    return model
