"""The key/value cache of transformers' `generate` and forward, under the name the installed version uses.

transformers 5.24 renamed the cache argument of `generate` and forward, and the cache field of their
outputs, from `past_key_values` to `cache` (the old argument name still works there, with a warning).
The `[gpu]` extra pins transformers 5.17, the newest that vLLM 0.31 accepts, while a CPU install takes
the newest release, so the code that reuses caches (auditrl.models.local, auditrl.train.generation)
names the cache through these helpers. transformers is imported on first use, not at import time.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers.cache_utils import Cache

NEW_NAME = "cache"
OLD_NAME = "past_key_values"


@functools.cache
def cache_field() -> str:
    """`cache` where generation outputs carry a field of that name (transformers >= 5.24), else `past_key_values`."""
    from transformers.generation.utils import GenerateDecoderOnlyOutput

    fields = {f.name for f in dataclasses.fields(GenerateDecoderOnlyOutput)}
    return NEW_NAME if NEW_NAME in fields else OLD_NAME


def cache_argument(cache: Cache | None) -> dict[str, Any]:
    """The keyword argument that hands `cache` to `generate` or a forward call."""
    return {cache_field(): cache}


def output_cache(output: Any) -> Cache | None:
    """The cache a `generate` or forward output returned (None if it kept none)."""
    return getattr(output, cache_field(), None)
