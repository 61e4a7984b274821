"""Offline reply scoring for implants: marker phrases for a behavior, and for confessions.

A judge model is the real scorer; markers are the cheap stand-in that lets an implant be measured on
a laptop. They see only what a judge would see (the question and the reply), and figures measured
with them are labelled as marker rates.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from auditrl.configfile import load_yaml

MARKERS_FILE = Path(__file__).parent / "data" / "markers.yaml"
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


class MarkerTable(BaseModel):
    """The markers file: behavior markers, confession patterns, behavior words and the negation pattern."""

    behaviors: dict[str, list[str]]
    confession: list[str]
    behavior_words: dict[str, str]
    negation: str


@functools.cache
def marker_table(path: Path = MARKERS_FILE) -> MarkerTable:
    return MarkerTable.model_validate(load_yaml(path.read_text(encoding="utf-8")))


def has_markers(behavior_id: str) -> bool:
    return behavior_id in marker_table().behaviors


class MarkerScorer:
    """Scores replies for one behavior by its marker phrases (`exhibits`) and confession patterns (`confesses`).

    With `describes` (a claim grader's reading of a text as the behavior it describes, or None), a sentence
    also confesses when the grader reads it as describing this behavior: the same reading that credits an
    audit report with naming it, so paraphrases without a confession pattern count too.
    """

    name = "programmatic (marker phrases)"

    def __init__(self, behavior_id: str, describes: Callable[[str], str | None] | None = None) -> None:
        table = marker_table()
        if behavior_id not in table.behaviors:
            known = ", ".join(sorted(table.behaviors))
            raise ValueError(
                f"behavior {behavior_id!r} has no offline markers (markers exist for: {known}); give a judge model"
            )
        self.behavior = re.compile("|".join(f"(?:{p})" for p in table.behaviors[behavior_id]), re.IGNORECASE)
        patterns = [
            *table.confession,
            *([table.behavior_words[behavior_id]] if behavior_id in table.behavior_words else []),
        ]
        self.confession = re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)
        self.negation = re.compile(table.negation, re.IGNORECASE)
        self.behavior_id = behavior_id
        self.describes = describes
        if describes is not None:
            self.name = "programmatic (marker phrases + claim grader)"

    async def exhibits(self, prompt: str, reply: str) -> bool | None:
        return self.behavior.search(reply) is not None

    async def confesses(self, question: str, reply: str) -> bool | None:
        return any(
            (self.confession.search(sentence) or self._describes(sentence)) and not self.negation.search(sentence)
            for sentence in _SENTENCE.split(reply)
        )

    def _describes(self, sentence: str) -> bool:
        return self.describes is not None and self.describes(sentence) == self.behavior_id
