"""Words of a text as stems: how text is matched against vocabularies (whole words and stems, never substrings).

A substring match reads "devoted" as a vote and "pesters" as a pest; matching word stems (the Snowball
English stemmer of nltk) keeps word boundaries and still takes "flatters" and "flattery" for the same word.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nltk.stem.snowball import SnowballStemmer

_WORD = re.compile(r"[a-z0-9]+")
_APOSTROPHES = str.maketrans({"’": "'", "‘": "'"})


@functools.cache
def _stemmer() -> SnowballStemmer:
    from nltk.stem.snowball import SnowballStemmer

    return SnowballStemmer("english")


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """The stem of one lower-case word."""
    return _stemmer().stem(word)


def words(text: str) -> list[str]:
    """Lower-case words (letters and digits); apostrophes and hyphens split them ("it's" -> it, s)."""
    return _WORD.findall(text.translate(_APOSTROPHES).lower())


def stems(text: str) -> tuple[str, ...]:
    """The stems of a text's words, in order."""
    return tuple(stem(w) for w in words(text))


def count_phrase(text_stems: Sequence[str], phrase: Sequence[str]) -> int:
    """How often `phrase` (stems) occurs as consecutive words of `text_stems`."""
    n = len(phrase)
    if n == 0:
        return 0
    return sum(tuple(text_stems[i : i + n]) == tuple(phrase) for i in range(len(text_stems) - n + 1))
