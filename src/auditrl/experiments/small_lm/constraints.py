"""The experiment's sampling constraints on the report turn, as the trainer's `TurnConstraint`: claim exploration
(a claim's first tokens, within sets) and the report grammars (auditrl.experiments.small_lm.report_grammar)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import LogitsProcessor, PreTrainedTokenizerBase

from auditrl.experiments.small_lm.copy_quote import transcript_reply_tokens
from auditrl.experiments.small_lm.report_grammar import QuoteSources, ReportGrammar, verdict_token_ids
from auditrl.experiments.small_lm.settings import QuoteUnit
from auditrl.scaffold.prompt_sets import PROMPT_SETS, openings
from auditrl.scaffold.transcript import Transcript
from auditrl.train.generation import Constraint

FirstTokens = list[tuple[frozenset[int], ...] | None]
"""Per row of a turn, the sets its first sampled tokens are restricted to, one set per position (None: free)."""


class RestrictFirst(LogitsProcessor):
    """Restricts the first sampled tokens of chosen rows, position by position, to sets (claim exploration: the
    spellings of a claim's verdict word, then the claim's keys), each drawn at the policy's relative
    probabilities within its set; other rows and later positions are free.

    `generate` reports the raw logits beside what it sampled, so each chosen token's logprob is the policy's own."""

    def __init__(self, first: FirstTokens, width: int) -> None:
        self.rows = [(row, [sorted(s) for s in sets]) for row, sets in enumerate(first) if sets]
        self.width = width

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        position = input_ids.shape[1] - self.width
        rows = [(row, sets[position]) for row, sets in self.rows if position < len(sets)]
        if not rows:
            return scores
        restricted = scores.clone()
        for row, tokens in rows:
            restricted[row] = float("-inf")
            restricted[row, tokens] = scores[row, tokens]
        return restricted  # type: ignore[return-value]  # transformers types logits as legacy FloatTensor


class Chain(Constraint):
    """Constraints applied in order; what each records, merged."""

    def __init__(self, processors: Sequence[LogitsProcessor]) -> None:
        self.processors = list(processors)

    @property
    def forced(self) -> dict[int, set[int]]:  # type: ignore[override]
        return {row: p for c in self.processors for row, p in getattr(c, "forced", {}).items()}

    @property
    def notes(self) -> dict[int, dict[str, Any]]:  # type: ignore[override]
        return {row: n for c in self.processors for row, n in getattr(c, "notes", {}).items()}

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        for processor in self.processors:
            scores = processor(input_ids, scores)
        return scores


@dataclass
class ReportConstraint:
    """One turn's rows under claim exploration (`first`) and the report grammar (`quotes`, with `grammar`). Under a
    grammar whose verdict follows the quote, claim exploration's rows have their verdict set by the grammar, not
    their first tokens. `temperature`: what the recorded claim probabilities are read at."""

    grammar: ReportGrammar | None
    first: FirstTokens
    quotes: QuoteSources
    temperature: float = 1.0

    def select(self, rows: Sequence[int]) -> ReportConstraint | None:
        picked = ReportConstraint(
            self.grammar, [self.first[i] for i in rows], [self.quotes[i] for i in rows], self.temperature
        )
        return picked if picked.active() else None

    def active(self) -> bool:
        return any(self.first) or any(q is not None for q in self.quotes)

    def processor(self, width: int) -> Constraint:
        processors: list[LogitsProcessor] = []
        first: FirstTokens | None = self.first if any(self.first) else None
        if any(q is not None for q in self.quotes):
            if self.grammar is None:
                raise ValueError("report rows to quote were passed, but experiment.report_grammar is free")
            claim_rows = None
            if self.grammar.verdict_last and first is not None:
                claim_rows, first = [bool(f) for f in first], None
            # the grammar first: it reads the policy's own verdict probabilities before claim exploration restricts them
            processors.append(
                self.grammar.processor(self.quotes, width, claim_rows=claim_rows, temperature=self.temperature)
            )
        if first is not None:
            processors.append(RestrictFirst(first, width))
        return Chain(processors)


def claim_tokens(tokenizer: PreTrainedTokenizerBase, prompt_set: str) -> tuple[frozenset[int], ...]:
    """The token sets claim exploration restricts a report's first tokens to: the spellings of the verdict `false`
    the prompt set's claim opening begins with, then that opening's other tokens as the tokenizer spells them."""
    name = PROMPT_SETS[prompt_set].openings
    claim = openings(name).get("claim") if name else None
    if claim is None:
        raise ValueError(f"experiment.claim_exploration: prompt set {prompt_set!r} has no claim opening")
    ids = tokenizer.encode(claim, add_special_tokens=False)
    verdicts = verdict_token_ids(tokenizer, words=("false",))
    if not ids or ids[0] not in verdicts:
        raise ValueError(
            f"experiment.claim_exploration: the claim opening {claim!r} of {name} does not start with the verdict "
            "`false` as one token of this tokenizer"
        )
    return (verdicts, *(frozenset([i]) for i in ids[1:]))


def quote_sources(
    grammar: str, unit: QuoteUnit, tokenizer: PreTrainedTokenizerBase
) -> Callable[[Transcript], list[list[int]]] | None:
    """What a report under the report grammar may quote: the target's replies as tokens (None: no grammar)."""
    return None if grammar == "free" else functools.partial(transcript_reply_tokens, tokenizer, unit=unit)
