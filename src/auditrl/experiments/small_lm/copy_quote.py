"""Copy-constrained quotes: once a report's description says it quotes the target ("... wrote:"), the tokens that
follow are a verbatim span of one of the target's replies, and when the quote stops the report ends.

Why: a small SFT base writes the teacher's claim form but invents the quote (its claims seldom share four words in a
row with a target reply, while every teacher claim does), so no claim is credited and GRPO has nothing to pay for. With
the quote taken from the target's own tokens, copying is no longer something a 135M student has to learn; what is left
to it is whether to claim, which reply to quote and where to stop, which the claim grader and the reward can tell apart.
An untrained base made to claim copies its quotes but then writes broken JSON after them, so the quote's end is also the
report's: `ENDING` closes the description, its prediction and the report, and nothing follows (a claim without a
confidence, which the report parser accepts as a claim).

The constraint acts on sampling only (a transformers `LogitsProcessor`): the model's own distribution is masked to
the allowed tokens and renormalised. Spans start at a word (a token that begins with a space) and may stop after any
token; a reply's double quote marks are read as single ones, and its whitespace as single spaces, as the teacher
quotes them, so a copied span never ends the JSON string early.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Sequence
from typing import Any

import torch
from transformers import LogitsProcessor

from auditrl.experiments.small_lm.settings import QuoteUnit

MARKER = "wrote:"
"""The words after which a description quotes the target (the teacher's claim form: `On <topic> it wrote: <quote>`)."""
ENDING = '"}]}'
"""What follows a quote: the description's closing mark, then the end of its prediction and of the report."""


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def quotable(reply: str) -> str:
    """A target reply as a quote inside a JSON string: whitespace as single spaces, `"` as `'`, no backslash."""
    return " ".join(reply.replace('"', "'").replace("\\", "/").split())


def sentences(reply: str) -> list[str]:
    """The sentences of a reply as quotable text (split after `.`, `!` or `?` and a space)."""
    return [s for s in _SENTENCE_END.split(quotable(reply)) if s]


def reply_tokens(tokenizer: Any, replies: Sequence[str], unit: QuoteUnit = "span") -> list[list[int]]:
    """What a quote copies from, as it would follow the marker (with its leading space): each reply (`span`) or each
    sentence of each reply (`sentence`), empty ones left out."""
    texts = [quotable(r) for r in replies] if unit == "span" else [s for r in replies for s in sentences(r)]
    return [tokenizer(" " + t, add_special_tokens=False).input_ids for t in texts if t]


def transcript_reply_tokens(tokenizer: Any, transcript: Any, unit: QuoteUnit = "span") -> list[list[int]]:
    """What a report may quote of the target's replies in a transcript (`reply_tokens`)."""
    return reply_tokens(tokenizer, [m.content for m in transcript.target_messages if m.role == "assistant"], unit)


@functools.cache
def _word_starts(tokenizer: Any) -> frozenset[int]:
    """The tokens of a vocabulary that begin a word (their text starts with a space)."""
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    return frozenset(
        i for i, p in enumerate(pieces) if p is not None and tokenizer.convert_tokens_to_string([p]).startswith(" ")
    )


class QuoteCopy(LogitsProcessor):
    """Masks each row's next-token scores to a copy of its target's replies while its description quotes them, then
    to `ENDING` and an end of turn.

    `sources[b]` holds row b's reply token sequences (`reply_tokens`); `prompt_length` is where generation began
    (the same for every row of a left-padded batch); `opened` says the prompt itself ends with the marker, so the
    quote begins with the first generated token; `ending` is what closes a quote (the report grammar that quotes
    before its verdict closes it with the words that lead to the verdict); `whole`: a quote is one whole source
    sequence (a sentence, `reply_tokens(unit="sentence")`), begun at its start and stopped only at its end. Before
    the marker scores pass unchanged.
    """

    def __init__(
        self,
        tokenizer: Any,
        sources: Sequence[Sequence[Sequence[int]]],
        prompt_length: int,
        eos_ids: Collection[int],
        opened: bool = False,
        ending: str = ENDING,
        whole: bool = False,
    ) -> None:
        self.tokenizer = tokenizer
        self.sources = [[list(s) for s in row] for row in sources]
        self.prompt_length = prompt_length
        self.eos_ids = set(eos_ids)
        self.opened = opened
        self.whole = whole
        self.starts = _word_starts(tokenizer)
        self.ending = tokenizer(ending, add_special_tokens=False).input_ids
        self._started: dict[int, int] = {}  # row -> where its quote began, found once (what it wrote never changes)

    def quote_start(self, row: int, generated: list[int]) -> int | None:
        """Where the row's quote begins (the first token after the marker), or None before the marker."""
        if self.opened:
            return 0
        if row in self._started:
            return self._started[row]
        if MARKER not in self.tokenizer.decode(generated):
            return None
        for end in range(1, len(generated) + 1):
            text = self.tokenizer.decode(generated[:end])
            if MARKER in text and not text.endswith(" "):
                self._started[row] = end
                return end
        return None

    def allowed(self, row: int, quote: list[int]) -> set[int]:
        """The tokens row `row` may write next, given what it wrote since the marker."""
        if self.ending[0] in quote:  # the quote has stopped: the rest of the ending, then the end of the turn
            written = len(quote) - quote.index(self.ending[0])
            return {self.ending[written]} if written < len(self.ending) else self.eos_ids
        sources = self.sources[row]
        n = len(quote)
        if self.whole:
            following = {s[n] for s in sources if len(s) > n and s[:n] == quote}
            return following | ({self.ending[0]} if quote in sources else set())
        if not quote:
            return {t for s in sources for t in s if t in self.starts}
        return {s[i + n] for s in sources for i in range(len(s) - n) if s[i : i + n] == quote} | {self.ending[0]}

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        for row in range(input_ids.shape[0]):
            if not self.sources[row]:
                continue
            generated = input_ids[row, self.prompt_length :].tolist()
            start = self.quote_start(row, generated)
            if start is None:
                continue
            keep = torch.zeros_like(scores[row], dtype=torch.bool)
            keep[list(self.allowed(row, generated[start:]))] = True
            scores[row] = scores[row].masked_fill(~keep, float("-inf"))
        return scores
