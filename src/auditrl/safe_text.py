"""Text from outside (model replies, servers, files) made safe to store, show and put in an error line.

A model may answer with anything: half an emoji (a lone UTF-16 surrogate, which no UTF-8 file can hold),
terminal escape sequences, megabytes in one field. A file may hold a value that takes minutes to print.
These helpers bound and clean such text at the point where it is stored or shown, never earlier, so
what the model said is kept as faithfully as a file allows.
"""

from __future__ import annotations

import re
import reprlib
from typing import Any

VALUE_CHARS = 60
"""How much of a value an error message shows."""
SHOWN_CHARS = 2000
"""How much of one piece of model text a terminal line shows."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, VALUE_CHARS, VALUE_CHARS
_REPR.maxdict = _REPR.maxlist = _REPR.maxtuple = _REPR.maxset = 6


def clean_text(text: str) -> str:
    """`text` as valid Unicode: surrogate pairs joined into their character, lone surrogates replaced by U+FFFD."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def clean_strings(value: Any) -> Any:
    """`value` (JSON-like: dicts, lists, strings) with every string, keys included, passed through `clean_text`."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_strings(k): clean_strings(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_strings(v) for v in value]
    return value


def short_repr(value: Any, limit: int = VALUE_CHARS) -> str:
    """A repr of `value` cut to about `limit` characters, built without walking all of a huge value."""
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clip(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text` cut to `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def for_terminal(text: str, limit: int = SHOWN_CHARS) -> str:
    """Model text for a terminal: valid Unicode, clipped, control characters (escape sequences) shown as \\xNN."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", clip(clean_text(text), limit))
