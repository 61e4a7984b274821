"""The starting policy's verdict after each quote a training audit may write (experiment.expected_verdict: start).

Under `experiment.quote_credit: expected` the quote earns what its report earns in expectation over a verdict after it.
The policy's own verdict moves through the LoRA weights it shares with the quote, however the loss leaves it out.
The starting policy's does not: every sentence of
every training row is scored by it once, before the first step, and the quote is trained for an auditor that quotes
with the trained policy and keeps the start's verdict (benchmarks/report_learning.py evaluates that auditor exactly,
in its start-verdict table).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from auditrl.experiments.small_lm.claim_threshold import row_key
from auditrl.experiments.small_lm.report_choices import ChoiceScores, ProbedAudit
from auditrl.scaffold.transcript import Transcript

START_VERDICTS_FILE = "start_verdicts.json"


def _words(text: str) -> str:
    return " ".join(text.split())


class StartVerdict:
    """The starting policy's P(claim) after each sentence of each training row, by `row_key` and sentence."""

    def __init__(self, table: Mapping[str, Mapping[str, float]], quote_words: str) -> None:
        self.table = {row: {_words(text): p for text, p in sentences.items()} for row, sentences in table.items()}
        self.quote_words = quote_words

    def claim_probability(self, transcript: Transcript, evidence: str) -> float | None:
        """P(claim) after the quoted `evidence` (the report's quote, its opening words included); None where the row
        was not scored or its probing gave no such sentence (a row's probing is scripted, so that is not expected)."""
        quoted = _words(evidence.removeprefix(self.quote_words))
        return self.table.get(row_key(transcript), {}).get(quoted)


def start_verdicts(scored: Sequence[tuple[ProbedAudit, ChoiceScores]]) -> dict[str, dict[str, float]]:
    """The starting policy's P(claim) after every sentence of every row it scored
    (auditrl.experiments.small_lm.report_choices.score_rows), by `row_key` and sentence text."""
    return {row_key(a.transcript): {c.text: p for c, p in zip(a.choices, s.claim, strict=True)} for a, s in scored}
