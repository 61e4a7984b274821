"""Holding the policy's claim threshold during GRPO (experiment.claim_rate_target).

GRPO on a small report-writing policy moves where the verdict sits (how readily the policy claims anywhere) far more
than what it reads, and that threshold alone can decide identification and FP calibration. A cost
charged on every claim, planted or benign alike, moves the threshold and nothing else; adapting the cost by dual
ascent so that the benign claim rate stays at its target leaves GRPO only one way to earn more: claim on the
evidence of planted targets rather than on benign ones.

The target is either one rate for every step or, with `start`, the starting policy's own exact claim rate on each
benign row (`start_claim_rates`): one step's benign audits share one target, and rows' rates differ by up to 0.85,
so a fixed target compares the policy with a different row each step while `start` compares it with itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import mean
from typing import Any

from auditrl.atomic import atomic_write_text
from auditrl.experiments.small_lm.report_choices import ChoiceScores, ProbedAudit
from auditrl.judges.claim_grader import report_outcome
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import CLAIM_PROBABILITY

HISTORY_FILE = "claim_cost.json"
START_RATES_FILE = "claim_rate_start.json"


def row_key(transcript: Transcript) -> str:
    """The training row (target, seed, family, benign) an audit was drawn from, as a JSON key."""
    return json.dumps([transcript.behavior_id, transcript.seed_id, transcript.target_family, transcript.benign])


def benign_audits(transcripts: Sequence[Transcript], rows: Mapping[str, float] | None = None) -> list[Transcript]:
    """The step's benign audits that ran, and with `rows` only those of a row it holds."""
    return [t for t in transcripts if t.benign and t.status != "error" and (rows is None or row_key(t) in rows)]


def benign_claim_rate(transcripts: Sequence[Transcript]) -> float | None:
    """The step's benign claim rate (0-1): the mean of the policy's own P(claim) where it drew its verdict (smoother
    than four sampled verdicts), else the share of benign reports that claim; None without benign audits."""
    return _claim_rate(benign_audits(transcripts))


def _claim_rate(benign: Sequence[Transcript]) -> float | None:
    if not benign:
        return None
    probabilities = [CLAIM_PROBABILITY.get(t) for t in benign]
    if all(p is not None for p in probabilities):
        return mean(float(p) for p in probabilities if p is not None)
    return mean(report_outcome(t.report) == "claim" for t in benign)


class ClaimThreshold:
    """A cost taken off the reward of every audit that claims, raised after each step by `step_size` times how far
    the step's benign claim rate lies above `target` (lowered when below; it may turn into a bonus).

    The target is a fixed rate, or a rate per benign row (`row_key`), such as the starting policy's there; then a
    step compares its audits with their own rows' rates, and audits of a row it lacks are left out. The
    cost each step charged and the cost it left are written to `claim_cost.json` in the run, so a resumed run
    continues from the cost its checkpoint trained with.
    """

    def __init__(self, target: float | Mapping[str, float], step_size: float, path: Path | None) -> None:
        self.target = target
        self.step_size = step_size
        self.path = path
        self.cost = 0.0
        self.charged = 0.0
        """The cost the last step charged."""
        self.history: dict[str, dict[str, Any]] = (
            json.loads(path.read_text(encoding="utf-8")) if path and path.is_file() else {}
        )
        self._resumed = False

    def _resume(self, step: int) -> None:
        """Take the cost the last step before `step` left, when the run is resumed."""
        if earlier := [int(s) for s in self.history if int(s) < step]:
            self.cost = float(self.history[str(max(earlier))]["cost_next"])
        self.history = {s: v for s, v in self.history.items() if int(s) < step}
        self._resumed = True

    def charge(
        self, step: int, transcripts: Sequence[Transcript], rewards: Sequence[float | None]
    ) -> list[float | None]:
        """`rewards` with this step's cost taken off every claim; then the cost moves toward the target."""
        if not self._resumed:
            self._resume(step)
        self.charged = charged = self.cost
        out = [
            r - charged if r is not None and report_outcome(t.report) == "claim" else r
            for t, r in zip(transcripts, rewards, strict=True)
        ]
        benign = benign_audits(transcripts, self.target if isinstance(self.target, Mapping) else None)
        rate, target = _claim_rate(benign), None
        if rate is not None:
            target = mean(self.target[row_key(t)] for t in benign) if isinstance(self.target, Mapping) else self.target
            self.cost += self.step_size * (rate - target)
        self.history[str(step)] = {
            "cost_charged": charged,
            "benign_claim_rate": rate,
            "target": target,
            "cost_next": self.cost,
        }
        if self.path is not None:
            atomic_write_text(self.path, json.dumps(self.history, indent=1))
        return out


def start_claim_rates(scored: Sequence[tuple[ProbedAudit, ChoiceScores]]) -> dict[str, float]:
    """The starting policy's exact claim rate on each benign row it scored (every report it may write, scored as the
    grammar samples it: auditrl.experiments.small_lm.report_choices.score_rows), by `row_key`."""
    return {row_key(a.transcript): s.claim_rate for a, s in scored if a.transcript.benign}
