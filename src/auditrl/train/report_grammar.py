"""The verdict-and-quote report grammar (`episodes.report_grammar: verdict_quote`): in the report turn the policy
chooses only the verdict and, for a claim, which words of the target's replies to quote; the scaffold writes the rest.

Why: every SmolLM2 run so far spent its report gradient on JSON and on invented quotes (the sixth run's SFT base
quoted the target in 1 of 42 forced claims; its GRPO unravelled the reports' closing brackets), and a 135M model
made to claim with a copied quote is credited about as often as a span picked at random. Under this grammar a
report is always one of two forms, both parsed without repair by the report parser and read by the claim grader:

- nothing found: the report opening, a spelling of `true`, then the prompt set's `silent` words;
- a claim: a spelling of `false`, the prompt set's `claim` and `quote` words (`... "description": "It wrote:`), a
  verbatim span of the target's replies (auditrl.train.copy_quote.QuoteCopy), then its `ENDING`; a quote that would
  leave no room for the ending within the turn's token budget is stopped, so no report is cut off.

So the decisions left to the policy are the ones the reward can tell apart: whether to claim (discrimination)
and what to quote (identification, as the claim grader reads the quote). The constraint masks sampling only; a
position with one allowed token is forced, recorded so that its token stays in context but out of the loss (it is
the scaffold's word, not the policy's), while the verdict and the quote are trained at the policy's own
unconstrained probabilities, as TRL scores sampled tokens.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import torch
from auditrl.scaffold.prompt_sets import PROMPT_SETS, openings
from auditrl.train.copy_quote import ENDING, QuoteCopy
from auditrl.train.generation import Constraint, QuoteSources
from auditrl.train.sft import verdict_token_ids



class ReportGrammar:
    """The grammar's fixed tokens for one tokenizer and prompt set, and the report turn's token budget; `processor`
    binds it to a batch."""

    def __init__(self, tokenizer: Any, prompt_set: str, eos_ids: Collection[int], budget: int) -> None:
        name = PROMPT_SETS[prompt_set].openings
        words = openings(name) if name else {}
        missing = [k for k in ("report", "claim", "quote", "silent") if k not in words]
        if missing:
            raise ValueError(f"episodes.report_grammar: prompt set {prompt_set!r} has no {', '.join(missing)} words in its openings file")
        self.tokenizer = tokenizer
        self.eos_ids = set(eos_ids)
        self.budget = budget
        self.claims = verdict_token_ids(tokenizer, words=("false",))
        self.silences = verdict_token_ids(tokenizer, words=("true",))
        claim = tokenizer.encode(words["claim"] + words["quote"], add_special_tokens=False)
        silent = tokenizer.encode("true" + words["silent"], add_special_tokens=False)
        if not claim or claim[0] not in self.claims or not silent or silent[0] not in self.silences:
            raise ValueError(f"episodes.report_grammar: the claim or silent words of {name} do not follow a verdict token")
        self.claim_rest, self.silent_rest = claim[1:], silent[1:]
        if 1 + len(self.claim_rest) + 1 + len(tokenizer.encode(ENDING, add_special_tokens=False)) + 1 > budget:
            raise ValueError(f"episodes.report_grammar: a report turn of {budget} tokens cannot hold a claim of one quoted word")

    def processor(self, sources: QuoteSources, prompt_length: int) -> GrammarProcessor:
        return GrammarProcessor(self, sources, prompt_length)


class GrammarProcessor(Constraint):
    """Masks the scores of each row with sources to what the grammar allows next; `forced[row]` collects the
    generated positions that had one allowed token."""

    def __init__(self, grammar: ReportGrammar, sources: QuoteSources, prompt_length: int) -> None:
        self.grammar = grammar
        self.rows = [row for row, s in enumerate(sources) if s is not None]
        self.prompt_length = prompt_length
        self.quotes = QuoteCopy(grammar.tokenizer, [s or [] for s in sources], 0, grammar.eos_ids, opened=True)
        self.forced = {row: set() for row in self.rows}

    def allowed(self, row: int, generated: Sequence[int]) -> set[int]:
        g = self.grammar
        if not generated:
            return set(g.claims | g.silences)
        rest = g.claim_rest if generated[0] in g.claims else g.silent_rest
        written = len(generated) - 1
        if written < len(rest):
            return {rest[written]}
        if generated[0] in g.silences:
            return g.eos_ids
        quote = list(generated[1 + len(rest) :])
        stopping = self.quotes.ending[0] in quote
        if quote and not stopping and len(generated) + len(self.quotes.ending) + 1 >= g.budget:
            return {self.quotes.ending[0]}  # the last room for the ending and the end of the turn
        # a row with no reply to quote may only end its (empty) quote
        return self.quotes.allowed(row, quote) or {self.quotes.ending[0]}

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        position = input_ids.shape[1] - self.prompt_length
        for row in self.rows:
            keep = self.allowed(row, input_ids[row, self.prompt_length :].tolist())
            if len(keep) == 1:
                self.forced[row].add(position)
            mask = torch.ones_like(scores[row], dtype=torch.bool)
            mask[list(keep)] = False
            scores[row] = scores[row].masked_fill(mask, float("-inf"))
        return scores
