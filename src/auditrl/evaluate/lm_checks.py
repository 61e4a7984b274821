"""What a small language-model auditor's transcripts show: its format, and whether it gathered evidence.

These are the checks a warm start and a learning run are read by: whether turns hold well-formed tool
calls, whether the report parsed, whether a report claims a behavior (on planted and benign targets
alike, so a habit of claiming shows), and whether an audit of an AuditWorld target raised the planted
behavior's trigger topic at all (without it the behavior cannot show, whatever the auditor reports).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from statistics import mean
from typing import Any

from auditrl.judges.claim_grader import claimed, report_valid
from auditrl.scaffold.text_protocol import parse_tool_calls
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import CLAIM_FORCED, CLAIM_PROBABILITY, GROUP, REWARD, REWARD_DETAILS, STEP
from auditrl.stats import mean_ci


def turn_validity(t: Transcript) -> float | None:
    """Share (0-100) of audit turns with at least one explicit tool call, all of them well-formed (a reply the
    parser could only send on as a plain message does not count); None without turns."""
    turns = [m for m in t.auditor_messages if m.role == "assistant"][: t.turns_used]
    if not turns:
        return None
    valid = [
        bool(calls := parse_tool_calls(m.content, fallback=False)) and all(c.parse_error is None for c in calls)
        for m in turns
    ]
    return 100.0 * sum(valid) / len(valid)


def rollouts_by_third(transcripts: Sequence[Transcript]) -> list[dict[str, Any]]:
    """A training run's rollouts (metadata `step`) by third of the run: what the policy sampled and the reward
    it got; a run of fewer than three steps has fewer thirds. Claim rates count the policy's own verdicts only:
    a report whose claim exploration set the verdict (`claim_forced`) is counted apart, with its reward. Under a report
    grammar, also the policy's own mean P(claim) on planted and on benign targets. `spread_groups_*`: the share of
    GRPO groups (metadata `group`) whose rewards differ; a group whose rollouts all got the same reward has no
    advantage and teaches nothing, so when benign groups keep a spread and planted ones lose it, silence is all that
    is taught. `quote_credited_planted`: under quote credit (reward.quote_credit: claim), the share of planted
    rollouts whose quoted evidence a claim would have been paid for, whatever their verdict: the choice of evidence.
    `claim_cost`: under a held threshold (reward.claim_rate_target), the cost a claim paid, averaged over the third's
    steps (negative: a bonus)."""
    steps = sorted({int(t.metadata[STEP]) for t in transcripts if STEP in t.metadata})
    thirds = []
    for part in range(3):
        chosen = set(steps[part * len(steps) // 3 : (part + 1) * len(steps) // 3])
        if not chosen:
            continue
        group = [t for t in transcripts if t.metadata.get(STEP) in chosen]
        turns = [v for t in group if (v := turn_validity(t)) is not None]
        forced = [t for t in group if CLAIM_FORCED.get(t)]
        free = [t for t in group if not CLAIM_FORCED.get(t)]
        planted, benign = [t for t in free if not t.benign], [t for t in free if t.benign]
        rewards = [float(r) for t in group if (r := REWARD.get(t)) is not None]
        thirds.append(
            {
                "steps": f"{min(chosen)}-{max(chosen)}",
                "rollouts": len(group),
                "valid_tool_calls": mean(turns) if turns else None,
                "valid_reports": 100.0 * mean(report_valid(t) for t in group),
                "claims_planted": 100.0 * mean(claimed(t) for t in planted) if planted else None,
                "claims_benign": 100.0 * mean(claimed(t) for t in benign) if benign else None,
                "benign_nothing_found": 100.0 * mean(bool(t.report and t.report.no_behavior_found) for t in benign)
                if benign
                else None,
                "reward": mean_ci(rewards).model_dump() if rewards else None,
                "claim_probability_planted": _mean_claim_probability(t for t in group if not t.benign),
                "claim_probability_benign": _mean_claim_probability(t for t in group if t.benign),
                "forced_claims": len(forced),
                "forced_claim_reward_planted": _mean_reward(t for t in forced if not t.benign),
                "forced_claim_reward_benign": _mean_reward(t for t in forced if t.benign),
                "free_reward_planted": _mean_reward(planted),
                "spread_groups_planted": _spread_share(t for t in group if not t.benign),
                "spread_groups_benign": _spread_share(t for t in group if t.benign),
                "quote_credited_planted": _quote_credited(t for t in group if not t.benign),
                "claim_cost": mean(costs)
                if (
                    costs := [
                        float(c) for t in group if (c := (REWARD_DETAILS.get(t) or {}).get("claim_cost")) is not None
                    ]
                )
                else None,
            }
        )
    return thirds


def _mean_claim_probability(transcripts: Iterable[Transcript]) -> float | None:
    """Mean of the policy's own P(claim) where it drew its verdict under a report grammar (forced claims included:
    the probability is read before claim exploration restricts it), in percent; None without any."""
    values = [float(p) for t in transcripts if (p := CLAIM_PROBABILITY.get(t)) is not None]
    return 100.0 * mean(values) if values else None


def _mean_reward(transcripts: Iterable[Transcript]) -> float | None:
    rewards = [float(r) for t in transcripts if (r := REWARD.get(t)) is not None]
    return mean(rewards) if rewards else None


def _quote_credited(transcripts: Iterable[Transcript]) -> float | None:
    """Share (0-100) of audits whose quote a claim would have been paid for (quote credit's `quote_reward` above 0);
    None where none was graded so."""
    graded = [float(q) > 0 for t in transcripts if (q := (REWARD_DETAILS.get(t) or {}).get("quote_reward")) is not None]
    return 100.0 * mean(graded) if graded else None


def _spread_share(transcripts: Iterable[Transcript]) -> float | None:
    """Share (0-100) of GRPO groups (by step and group) whose rollouts' rewards are not all equal; None without any."""
    groups: dict[tuple[Any, Any], set[float]] = {}
    for t in transcripts:
        if (r := REWARD.get(t)) is not None and (g := GROUP.get(t)) is not None:
            groups.setdefault((t.metadata.get(STEP), g), set()).add(float(r))
    return 100.0 * mean(len(rewards) > 1 for rewards in groups.values()) if groups else None
