"""The starting policy's verdict after each quote a training audit may write (reward.expected_verdict: start).

Under `reward.quote_credit: expected` the quote earns what its report earns in expectation over a verdict after it.
The policy's own verdict moves through the LoRA weights it shares with the quote, however the loss leaves it out
(docs/learning_runs.md, the twenty-third and twenty-fourth runs). The starting policy's does not: every sentence of
every training row is scored by it once, before the first step, and the quote is trained for an auditor that quotes
with the trained policy and keeps the start's verdict (benchmarks/report_learning.py evaluates that auditor exactly,
in its start-verdict table).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from auditrl.atomic import atomic_write_text
from auditrl.behaviors.schema import Behavior, Seed
from auditrl.scaffold.transcript import Transcript
from auditrl.train.claim_threshold import row_key
from auditrl.train.config import GRPOLMConfig
from auditrl.train.report_choices import evidence_grammar, probed_audits, score_audits
from auditrl.train.rollout import ChatSegments, EpisodeRow

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


def start_verdicts(
    cfg: GRPOLMConfig,
    model: Any,
    tokenizer: Any,
    behaviors: dict[str, Behavior],
    seeds: Sequence[Seed],
    rows: Sequence[EpisodeRow],
    path: Path,
) -> dict[str, dict[str, float]]:
    """Every training row probed as the run probes it and every sentence it may quote scored by the starting policy
    (auditrl.train.report_choices), by `row_key` and sentence text. Kept in `path` once computed, so a resumed run
    reads the verdict its first steps were trained against instead of scoring the moved policy."""
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    segments = ChatSegments(tokenizer)
    audits = probed_audits(cfg, segments, behaviors, seeds, list(dict.fromkeys(rows)))
    training = model.training
    model.eval()
    scores = score_audits(model, audits, evidence_grammar(cfg, segments), cfg.episodes.temperature, segments.pad_id)
    model.train(training)
    table = {row_key(a.transcript): {c.text: p for c, p in zip(a.choices, s.claim, strict=True)} for a, s in zip(audits, scores, strict=True)}
    atomic_write_text(path, json.dumps(table, indent=1))
    return table
