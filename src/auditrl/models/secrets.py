"""Secrets: credentials never travel in configs or model args, and their values never reach any output.

Keys come only from the environment. Whatever echoes one back (a server's 401 body that quotes the
key, a 500 with the request headers, a model that repeats it), `redact` replaces the value of every
secret variable a provider reads (the capability table's `keys`, and every `*_API_KEY`) before a line
is written: error strings, transcripts, log records and console output all pass through it.
`install_redaction` puts it in front of the process's log records and standard streams.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from auditrl.models.capabilities import key_variables

SECRET_ARG_NAMES = frozenset({"api_key", "apikey", "token", "secret", "password"})
"""Model-arg and config names that would carry a credential: refused, the environment holds keys."""
REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8
"""Shorter values are no real key, and replacing them would mangle ordinary text."""


def check_no_secret_args(args: Mapping[str, Any], what: str = "") -> dict[str, Any]:
    """`args` unless a key names a credential; raises ValueError saying to use the environment instead."""
    secrets = sorted(SECRET_ARG_NAMES.intersection(k.lower() for k in args))
    if secrets:
        raise ValueError(
            f"{what}may not carry credentials ({', '.join(secrets)}): set the provider's environment variable "
            "instead (e.g. OPENAI_API_KEY, ANTHROPIC_API_KEY)"
        )
    return dict(args)


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of the secret variables set in `environ` (default: this process's), longest first."""
    env = os.environ if environ is None else environ
    names, suffixes = key_variables()
    found = {
        value
        for name, value in env.items()
        if (name in names or name.endswith(tuple(suffixes))) and len(value) >= MIN_SECRET_CHARS
    }
    return sorted(found, key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with every secret value of the environment replaced by [redacted]."""
    for value in secret_values():
        if value in text:
            text = text.replace(value, REDACTED)
    return text


class _RedactingStream:
    """A text stream that redacts what is written and passes everything else to the stream it wraps."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(redact(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class _RedactingFactory:
    """A log record factory that redacts the records the factory it wraps makes."""

    def __init__(self, factory: Callable[..., logging.LogRecord]) -> None:
        self.factory = factory

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self.factory(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logging's to report, at emit time
            return record
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return record


def install_redaction() -> None:
    """Redact every log record made from now on, and what is written to stdout and stderr (idempotent)."""
    factory = logging.getLogRecordFactory()
    if not isinstance(factory, _RedactingFactory):
        logging.setLogRecordFactory(_RedactingFactory(factory))
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if not isinstance(stream, _RedactingStream):
            setattr(sys, name, _RedactingStream(stream))
