"""The report grammars (`experiment.report_grammar`): in the report turn the policy chooses only whether it found
something and which words of the target's replies to quote; the scaffold writes the rest.

Why: a free report of a 135M model spends its gradient on JSON and on invented quotes (GRPO unravels the reports'
closing brackets), and such a model made to claim with a copied quote is credited about as often as a span picked
at random. Under a grammar a report
is always one of two forms, both parsed by the report parser and read by the claim grader: "nothing found", or a
claim whose description is `It wrote: <a verbatim span of the target's replies>`
(auditrl.experiments.small_lm.copy_quote), never cut off (a quote stops where the rest still fits the turn's token
budget).

- `verdict_quote` (`ReportGrammar`, the `guided` prompt set): the verdict first (a spelling of `true` or `false`
  after the begun `{"no_behavior_found": `), then for a claim the prompt set's `claim` and `quote` words and the span.
- `quote_verdict` (`EvidenceGrammar`, the `guided_evidence` prompt set): the span first, as the report's
  `evidence` (begun `{"evidence": "It wrote:`), then the prompt set's `verdict` words and the verdict; a claim copies
  the evidence into its description. Why: under `verdict_quote` the verdict is drawn before anything is quoted, from
  the whole transcript, and it learns the prior (never claim) rather than the evidence; drawn right after the words the
  policy chose as its evidence, it can be learnt as a judgement of those words.

So the decisions left to the policy are the ones the reward can tell apart: whether to claim (discrimination)
and what to quote (identification, as the claim grader reads the quote). The constraint masks sampling only; a
position with one allowed token is forced, recorded so that its token stays in context but out of the loss (it is
the scaffold's word, not the policy's), while the verdict and the quote are trained at the policy's own
unconstrained probabilities, as TRL scores sampled tokens. Claim exploration's forced verdict is drawn among the
claim's spellings and trained so too.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import torch

from auditrl.experiments.small_lm.copy_quote import ENDING, MARKER, QuoteCopy, QuoteUnit
from auditrl.scaffold.prompt_sets import PROMPT_SETS, openings
from auditrl.train.generation import Constraint

QuoteSources = list[list[list[int]] | None]
"""Per row of a turn, the token sequences of the target replies its report may quote (None: the row is free)."""
IGNORED = -100


def verdict_token_ids(tokenizer: Any, words: tuple[str, ...] = ("true", "false")) -> frozenset[int]:
    """Token ids that spell one of the verdict words as one token (with or without a leading space)."""
    ids = (tokenizer.encode(w, add_special_tokens=False) for word in words for w in (word, f" {word}"))
    return frozenset(i[0] for i in ids if len(i) == 1)


def verdict_index(labels: Sequence[int], verdict_ids: frozenset[int]) -> int | None:
    """Position of the report's verdict word: the first verdict token of the last labelled run (the report turn;
    begun report words before it are unlabelled), or None when the report has none."""
    end = next((i for i in range(len(labels) - 1, -1, -1) if labels[i] != IGNORED), None)
    if end is None:
        return None
    start = end
    while start > 0 and labels[start - 1] != IGNORED:
        start -= 1
    return next((i for i in range(start, end + 1) if labels[i] in verdict_ids), None)


def _words(prompt_set: str, keys: Sequence[str]) -> dict[str, str]:
    name = PROMPT_SETS[prompt_set].openings
    words = openings(name) if name else {}
    missing = [k for k in keys if k not in words]
    if missing:
        raise ValueError(
            f"episodes.report_grammar: prompt set {prompt_set!r} has no {', '.join(missing)} words in its openings file"
        )
    return words


class ReportGrammar:
    """`verdict_quote`: the grammar's fixed tokens for one tokenizer and prompt set, and the report turn's token
    budget; `processor` binds it to a batch."""

    verdict_last = False
    """Whether the verdict follows the quote; when it does, claim exploration sets it there (`claim_rows`) rather
    than at the turn's first token."""
    keys: tuple[str, ...] = ("report", "claim", "quote", "silent")

    def __init__(
        self, tokenizer: Any, prompt_set: str, eos_ids: Collection[int], budget: int, unit: QuoteUnit = "span"
    ) -> None:
        words = _words(prompt_set, self.keys)
        self.unit = unit
        self.tokenizer = tokenizer
        self.eos_ids = set(eos_ids)
        self.budget = budget
        self.claims = verdict_token_ids(tokenizer, words=("false",))
        self.silences = verdict_token_ids(tokenizer, words=("true",))
        claim = tokenizer.encode(words["claim"] + words["quote"], add_special_tokens=False)
        silent = tokenizer.encode("true" + words["silent"], add_special_tokens=False)
        if not claim or claim[0] not in self.claims or not silent or silent[0] not in self.silences:
            raise ValueError(
                f"episodes.report_grammar: the claim or silent words of prompt set {prompt_set!r} do not follow "
                "a verdict token"
            )
        self.claim_rest, self.silent_rest = claim[1:], silent[1:]
        self.ending = tokenizer.encode(ENDING, add_special_tokens=False)
        if self.shortest_claim() > budget:
            raise ValueError(
                f"episodes.report_grammar: a report turn of {budget} tokens cannot hold a claim of one quoted word"
            )

    def shortest_claim(self) -> int:
        """Tokens of a claim quoting one token: verdict, keys, the quote, the ending, the end of the turn."""
        return 1 + len(self.claim_rest) + 1 + len(self.ending) + 1

    def processor(
        self,
        sources: QuoteSources,
        prompt_length: int,
        claim_rows: Sequence[bool] | None = None,
        temperature: float = 1.0,
    ) -> GrammarProcessor:
        """The constraint for one batch: rows with sources are written under the grammar; `claim_rows` (grammars
        whose verdict follows the quote) marks the rows whose verdict claim exploration restricts to a claim;
        `temperature` is the sampling temperature the recorded claim probabilities are read at."""
        return GrammarProcessor(self, sources, prompt_length, claim_rows, temperature)

    def allowed(self, quotes: QuoteCopy, row: int, generated: Sequence[int], claim: bool) -> set[int]:
        """The tokens row `row` may write next, given what it wrote this turn; `claim`: its verdict must claim."""
        if not generated:
            return set(self.claims if claim else self.claims | self.silences)
        rest = self.claim_rest if generated[0] in self.claims else self.silent_rest
        written = len(generated) - 1
        if written < len(rest):
            return {rest[written]}
        if generated[0] in self.silences:
            return self.eos_ids
        quote = list(generated[1 + len(rest) :])
        stopping = quotes.ending[0] in quote
        if quote and not stopping and len(generated) + len(quotes.ending) + 1 >= self.budget:
            return {quotes.ending[0]}  # the last room for the ending and the end of the turn
        # a row with no reply to quote may only end its (empty) quote
        return quotes.allowed(row, quote) or {quotes.ending[0]}

    def at_verdict(self, generated: Sequence[int]) -> bool:
        """Whether the next token is the verdict."""
        return not generated

    def longest_quote(self) -> int:
        """The most tokens a quote may hold within the report budget."""
        return self.budget - self.shortest_claim() + 1

    def copier(self, sources: QuoteSources) -> QuoteCopy:
        """The quote constraint over the rows' sources; whole sentences too long for the budget are left out (a span
        is stopped where the budget ends instead)."""
        return QuoteCopy(
            self.tokenizer, self._fitting(sources), 0, self.eos_ids, opened=True, whole=self.unit == "sentence"
        )

    def _fitting(self, sources: QuoteSources) -> list[list[list[int]]]:
        longest = self.longest_quote() if self.unit == "sentence" else None
        return [[q for q in s if longest is None or len(q) <= longest] if s else [] for s in sources]


class EvidenceGrammar(ReportGrammar):
    """`quote_verdict`: the evidence quote, the prompt set's `verdict` words, the verdict, then the rest of a
    "nothing found" report or a claim whose description repeats the quote (forced, token for token)."""

    verdict_last = True
    keys = ("report", "verdict", "claim", "quote", "silent")

    def __init__(
        self, tokenizer: Any, prompt_set: str, eos_ids: Collection[int], budget: int, unit: QuoteUnit = "span"
    ) -> None:
        words = _words(prompt_set, self.keys)
        if not words["report"].rstrip().endswith(MARKER):
            raise ValueError(
                f"episodes.report_grammar: quote_verdict needs a report opening that ends with {MARKER!r} "
                f"(prompt set {prompt_set!r})"
            )
        self.lead_words = words["verdict"]
        self.lead = tokenizer.encode(self.lead_words, add_special_tokens=False)
        super().__init__(tokenizer, prompt_set, eos_ids, budget, unit)

    def shortest_claim(self) -> int:
        """A one-token quote written twice, the verdict's words, the verdict, keys, ending and the end of the turn."""
        return 2 + len(self.lead) + 1 + len(self.claim_rest) + len(self.ending) + 1

    def allowed(self, quotes: QuoteCopy, row: int, generated: Sequence[int], claim: bool) -> set[int]:
        lead = self.lead
        if lead[0] not in generated:  # still quoting: a copy of a reply, stopped while the rest still fits
            if generated and self.shortest_claim() + 2 * len(generated) > self.budget:
                return {lead[0]}
            return quotes.allowed(row, list(generated)) or {lead[0]}
        quote = list(generated[: generated.index(lead[0])])
        after = generated[len(quote) :]
        if len(after) < len(lead):
            return {lead[len(after)]}
        if len(after) == len(lead):
            return set(self.claims if claim else self.claims | self.silences)
        tail = self.claim_rest + quote + self.ending if after[len(lead)] in self.claims else self.silent_rest
        written = len(after) - len(lead) - 1
        return {tail[written]} if written < len(tail) else self.eos_ids

    def at_verdict(self, generated: Sequence[int]) -> bool:
        return self.lead[0] in generated and len(generated) - generated.index(self.lead[0]) == len(self.lead)

    def longest_quote(self) -> int:
        return (self.budget - self.shortest_claim()) // 2 + 1

    def copier(self, sources: QuoteSources) -> QuoteCopy:
        return QuoteCopy(
            self.tokenizer,
            self._fitting(sources),
            0,
            self.eos_ids,
            opened=True,
            ending=self.lead_words,
            whole=self.unit == "sentence",
        )


GRAMMARS: dict[str, type[ReportGrammar]] = {"verdict_quote": ReportGrammar, "quote_verdict": EvidenceGrammar}
"""`episodes.report_grammar` -> its grammar (`free` has none)."""


def report_grammar(
    name: str, tokenizer: Any, prompt_set: str, eos_ids: Collection[int], budget: int, unit: QuoteUnit = "span"
) -> ReportGrammar | None:
    """The grammar `episodes.report_grammar` names, bound to a tokenizer, prompt set, report budget and quote unit."""
    return GRAMMARS[name](tokenizer, prompt_set, eos_ids, budget, unit) if name in GRAMMARS else None


class GrammarProcessor(Constraint):
    """Masks the scores of each row with sources to what the grammar allows next; `forced[row]` collects the
    generated positions that had one allowed token (but for a verdict claim exploration set, which the policy's
    probability still scores), and `notes[row]`: `claim_probability`, the policy's probability of a claim among the
    verdict's spellings where the row drew its verdict (before any restriction: what its own verdict would have
    been), and `verdict_at`, that position."""

    def __init__(
        self,
        grammar: ReportGrammar,
        sources: QuoteSources,
        prompt_length: int,
        claim_rows: Sequence[bool] | None = None,
        temperature: float = 1.0,
    ) -> None:
        self.grammar = grammar
        self.rows = [row for row, s in enumerate(sources) if s is not None]
        self.prompt_length = prompt_length
        self.quotes = grammar.copier(sources)
        self.claim_rows = set(row for row, c in enumerate(claim_rows or []) if c)
        self.temperature = temperature
        self.forced = {row: set() for row in self.rows}
        self.notes: dict[int, dict[str, float | int]] = {}
        self.spellings = sorted(grammar.claims | grammar.silences)
        self.claim_mask = torch.tensor([t in grammar.claims for t in self.spellings])

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        position = input_ids.shape[1] - self.prompt_length
        for row in self.rows:
            generated = input_ids[row, self.prompt_length :].tolist()
            claim = row in self.claim_rows
            keep = self.grammar.allowed(self.quotes, row, generated, claim)
            verdict = self.grammar.at_verdict(generated)
            if verdict:
                p = torch.softmax(scores[row, self.spellings].float() / self.temperature, -1)
                self.notes[row] = {"claim_probability": float(p[self.claim_mask].sum()), "verdict_at": position}
            if len(keep) == 1 and not (claim and verdict):
                self.forced[row].add(position)
            mask = torch.ones_like(scores[row], dtype=torch.bool)
            mask[list(keep)] = False
            scores[row] = scores[row].masked_fill(mask, float("-inf"))
        return scores
