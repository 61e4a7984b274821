"""The quote trained by the exact gradient of its expected reward over every sentence an audit lets it quote.

Why: GRPO estimates the gradient of the expected reward from a group of sampled reports, and the LM runs drew four
reports a group and two groups a step (80 groups in all, 69 distinct rows). Under a sentence report grammar with
teacher probing, quote credit `expected` and the starting policy's verdict (experiment.expected_verdict: start), a
report's expected reward is fixed by the sentence it quotes, and an audit offers about five sentences: the reward
design scores every one of them (a claim quoting it, and "nothing found"), so the expected reward of an audit,
sum over sentences of P(quote) x reward, is known exactly and so is its gradient. This is GRPO's objective (beta 0)
with the group made of every choice, each weighted by the probability the policy gives it, instead of a sample of
four: no sampling noise (with few groups, a sampled run's training trend can reverse with the seed), and every row
teaches every sentence it holds. `samples` puts the sampling back (GRPO's estimate
from a group of quotes drawn from the policy) to measure what the noise costs on the same rows.

The verdict is the starting policy's throughout, as under GRPO with `expected_verdict: start`: the trained adapter
quotes, and the auditor it is trained for keeps its start's verdict (benchmarks/report_learning.py evaluates that
auditor exactly, in its start-verdict table).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypedDict

import torch
from pydantic import Field

from auditrl.atomic import atomic_write_text
from auditrl.configfile import ConfigModel, RandomSeed
from auditrl.experiments.small_lm.report_choices import (
    ChoiceScores,
    ProbedAudit,
    claim_report,
    evidence_grammar,
    forward_choices,
    quote_log_probs,
    quote_opening,
    score_rows,
)
from auditrl.experiments.small_lm.settings import small_lm
from auditrl.rewards.records import RewardDesign
from auditrl.rewards.registry import design_spec
from auditrl.scaffold.store import write_transcripts
from auditrl.scaffold.transcript import Report
from auditrl.train.config import GRPOLMConfig
from auditrl.train.reward import scaled_reward
from auditrl.train.runtime import AsyncRunner

RECORD_FILE = "choice_gradient.json"
DATA_FILE = "choice_data.jsonl"
AUDITS_FILE = "audits/transcripts.jsonl"


class ChoiceGradientSettings(ConfigModel):
    """Which rows train the quote and how long."""

    episodes: int = Field(
        default=256, ge=1, description="Training rows drawn like the GRPO run's batches (duplicates dropped)."
    )
    epochs: float = Field(default=2.0, gt=0.0, description="Passes over the audits that have a choice to learn.")
    batch_size: int = Field(default=8, ge=1, description="Audits per optimizer step.")
    learning_rate: float = Field(default=3e-4, gt=0.0, description="AdamW learning rate of the adapter (constant).")
    seed: RandomSeed = Field(default=2, description="Seed of the rows (not the SFT's) and of the data order.")
    benign_weight: float = Field(
        default=1.0,
        ge=0.0,
        description=(
            "Weight of benign audits in the loss. Silence is all a benign target pays, so a benign audit pays the "
            "quotes after which the start's verdict keeps quiet, whatever that verdict keys on (0: the quote "
            "learns from planted audits only, where every quote but a creditable one earns the same)."
        ),
    )
    benign_anchor: float = Field(
        default=0.0,
        ge=0.0,
        description=(
            "Weight of KL(start's quote || the policy's quote) on benign audits, in the loss's reward units: holds "
            "the quote where it was on targets with nothing to find instead of paying what the start's verdict "
            "keeps quiet after (which rewards whatever that verdict keys on, such as short sentences). With "
            "benign_weight 0, planted audits move the quote toward credited evidence and benign audits only keep "
            "it from moving everywhere (e.g. to long sentences), so what moves it must tell the two apart (0: no "
            "anchor)."
        ),
    )
    samples: int | None = Field(
        default=None,
        ge=2,
        description="Quotes drawn per audit and step, from the policy's own probabilities: the gradient is then GRPO's "
        "estimate from that group (each drawn quote's reward minus the group's mean, times its "
        "log-probability) instead "
        "of the exact one, so a run shows whether the exact result survives sampling noise (None: exact).",
    )


def check_config(cfg: GRPOLMConfig) -> None:
    """The exact expected reward needs a report fixed by its quote and a reward that scores each report alone;
    raises ValueError naming what differs."""
    reward, settings = cfg.reward, small_lm(cfg)
    if (settings.quote_credit, settings.expected_verdict, settings.claim_rate_target) != ("expected", "start", None):
        raise ValueError(
            "the choice gradient trains the quote for the starting policy's verdict: it needs experiment.quote_credit: "
            "expected, experiment.expected_verdict: start and no experiment.claim_rate_target (got "
            f"{settings.quote_credit}, {settings.expected_verdict}, {settings.claim_rate_target})"
        )
    spec = design_spec(reward.design)
    if spec.groups or spec.references:
        raise ValueError(
            f"reward.design {reward.design!r} scores a report against its group or a reference, so a report's reward "
            "depends on which others were sampled; the choice gradient needs a design that scores each report alone"
        )


class ChoiceRow(TypedDict):
    """One scored audit as data.jsonl keeps it: its choices, their expected rewards and the policy's start on them."""

    transcript: str
    benign: bool
    input_ids: list[int]
    choices: list[list[int]]
    rewards: list[float]
    texts: list[str]
    credited: list[bool]
    start_quote: list[float]
    start_claim: list[float]
    choice: bool
    trained: bool


def choice_rewards(
    design: RewardDesign,
    runner: AsyncRunner,
    audit: ProbedAudit,
    claims: Sequence[float],
    quote_words: str,
    cfg: GRPOLMConfig,
) -> list[float | None]:
    """What each choice's report earns in expectation over the starting verdict after it: P(claim) x the reward of a
    claim quoting it + (1 - P(claim)) x the reward of "nothing found", each scored by the run's design (benign scale
    and no-contact reward applied as GRPO applies them). None where a score failed."""
    transcript = audit.transcript
    reports = [claim_report(c, quote_words) for c in audit.choices] + [Report(no_behavior_found=True)]
    variants = [transcript.model_copy(update={"report": r}) for r in reports]
    records = runner.run(design.score_group(variants))
    rewards = [
        scaled_reward(t, r, cfg.reward.no_contact_reward, cfg.reward.benign_scale)[0]
        for t, r in zip(variants, records, strict=True)
    ]
    silence = rewards[-1]
    return [
        None if r is None or silence is None else p * r + (1.0 - p) * silence
        for p, r in zip(claims, rewards[:-1], strict=True)
    ]


def estimate_label(samples: int | None) -> str:
    """How a run's gradient was estimated, as its tables name it."""
    return "exact gradient" if samples is None else f"{samples} quotes sampled an audit"


def expected_reward(scores: ChoiceScores, rewards: Sequence[float]) -> float:
    return sum(q * r for q, r in zip(scores.quote, rewards, strict=True))


def choice_loss(
    grammar: Any,
    temperature: float,
    pad_id: int,
    scale: float,
    trace: list[dict[str, Any]] | None = None,
    samples: int | None = None,
) -> Callable[[Any, dict[str, Any]], torch.Tensor]:
    """One audit's loss: minus its expected reward over every choice, times its `weight` (1 when absent), over
    `scale` (the weighted rewards' spread over the training choices, as GRPO's batch-scaled advantages), plus `anchor`
    x KL(the start's quote || the policy's) where the audit carries an anchor. The reward term's gradient is the
    policy gradient with the whole distribution as the group; no baseline is needed, since the probabilities sum to
    one. With `samples`, the reward term is GRPO's estimate instead: that many quotes drawn from the policy (torch's
    seeded generator), each weighted by its reward minus the group's mean (in expectation (samples - 1) / samples of
    the exact gradient). Each call's exact expected reward (as paid and as weighted) and KL go to `trace` with the
    trainer's step (`inputs["step"]`, when given)."""

    def loss(model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        first, logits = forward_choices(model, inputs["input_ids"][0].tolist(), inputs["choices"], pad_id)
        log_quote = quote_log_probs(first, logits, inputs["choices"], grammar, temperature)
        quote = log_quote.exp()
        rewards = torch.tensor(inputs["rewards"], device=quote.device, dtype=quote.dtype)
        expected = (quote * rewards).sum()
        weight = inputs.get("weight", 1.0)
        if samples is None:
            value = -weight * expected / scale
        else:
            drawn = torch.multinomial(quote.detach(), samples, replacement=True)
            paid = rewards[drawn]
            value = -weight * ((paid - paid.mean()) * log_quote[drawn]).mean() / scale
        kl = None
        if anchor := inputs.get("anchor", 0.0):
            start = torch.tensor(inputs["start_quote"], device=log_quote.device, dtype=log_quote.dtype)
            kl = (torch.special.xlogy(start, start) - start * log_quote).sum()
            value = value + anchor * kl
        if trace is not None:
            trace.append(
                {
                    "step": inputs.get("step"),
                    "benign": inputs.get("benign", False),
                    "expected reward": expected.item(),
                    "weighted": weight * expected.item(),
                    "KL": None if kl is None else kl.item(),
                }
            )
        return value

    return loss


def by_step(trace: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each training step's mean expected reward as the loss weighs it, its mean expected reward as paid over planted
    and benign audits apart, and its benign audits' mean KL from the start's quote (None where it had none of them)."""
    steps: dict[int, list[dict[str, Any]]] = {}
    for entry in trace:
        steps.setdefault(entry["step"], []).append(entry)

    def mean_of(entries: list[dict[str, Any]], key: str) -> float | None:
        values = [e[key] for e in entries if e[key] is not None]
        return statistics.fmean(values) if values else None

    return [
        {
            "step": step,
            "expected reward": mean_of(entries, "weighted"),
            "planted": mean_of([e for e in entries if not e["benign"]], "expected reward"),
            "benign": mean_of([e for e in entries if e["benign"]], "expected reward"),
            "benign KL to start": mean_of([e for e in entries if e["benign"]], "KL"),
        }
        for step, entries in sorted(steps.items())
    ]


def run_choice_gradient(
    cfg: GRPOLMConfig,
    settings: ChoiceGradientSettings,
    out: Path,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Probe the rows, score every choice's reward, train `policy.init_adapter` by the exact expected reward; writes
    `out/adapter` and the record, and returns the record."""
    from transformers import set_seed

    from auditrl.behaviors.library import load_behaviors
    from auditrl.experiments.small_lm.choice_sft import choice_rows
    from auditrl.models.local import set_adapter_base
    from auditrl.models.lora import fine_tune
    from auditrl.train.episodes import training_seeds
    from auditrl.train.outputs import ADAPTER_DIR, portable_base
    from auditrl.train.policy import load_policy
    from auditrl.train.reward import make_design
    from auditrl.train.rollout import ChatSegments
    from auditrl.train.sft import sft_rows

    check_config(cfg)
    if cfg.policy.init_adapter is None:
        raise ValueError("the choice gradient trains a starting policy's quote: set policy.init_adapter (the SFT base)")
    out.mkdir(parents=True, exist_ok=True)
    started, cpu = time.perf_counter(), time.process_time()
    set_seed(settings.seed)
    model, tokenizer = load_policy(cfg.policy)
    segments = ChatSegments(tokenizer)
    behaviors = load_behaviors(cfg.data.behavior_paths or None)
    seeds = training_seeds(cfg, behaviors)
    rows = choice_rows(cfg, segments, behaviors, seeds, sft_rows(cfg, settings, behaviors, seeds))
    if on_progress is not None:
        on_progress("start's scores", 0, len(rows))
    scored = score_rows(cfg, model, tokenizer, behaviors, seeds, rows)
    write_transcripts(out / AUDITS_FILE, [a.transcript for a, _ in scored])
    quote_words = quote_opening(cfg)
    runner = AsyncRunner()
    design = make_design(cfg, out)
    data: list[ChoiceRow] = []
    dropped = {"a score failed": 0, "nothing to choose": 0, "benign, weight 0": 0}
    for audit, scores in scored:
        scored_rewards = choice_rewards(design, runner, audit, scores.claim, quote_words, cfg)
        rewards = [r for r in scored_rewards if r is not None]
        if len(rewards) < len(scored_rewards):
            dropped["a score failed"] += 1
            continue
        choice = max(rewards) - min(rewards) > 1e-9
        benign = audit.transcript.benign
        row = ChoiceRow(
            transcript=audit.transcript.id,
            benign=benign,
            input_ids=audit.prefix,
            choices=[list(c.tokens) for c in audit.choices],
            rewards=rewards,
            texts=[c.text for c in audit.choices],
            credited=[c.credited for c in audit.choices],
            start_quote=scores.quote,
            start_claim=scores.claim,
            choice=choice,
            trained=choice and (settings.benign_weight > 0 or settings.benign_anchor > 0 or not benign),
        )
        dropped["nothing to choose"] += not row["choice"]
        dropped["benign, weight 0"] += row["choice"] and not row["trained"]
        data.append(row)
    runner.close()
    atomic_write_text(out / DATA_FILE, "".join(json.dumps(r) + "\n" for r in data))
    trained = [r for r in data if r["trained"]]
    if not trained:
        raise ValueError(
            f"no audit of {len(rows)} rows has a choice whose reward "
            f"differs{' on a planted target' if not settings.benign_weight else ''} (see {out / DATA_FILE})"
        )
    weight = lambda r: settings.benign_weight if r["benign"] else 1.0  # noqa: E731
    scale = statistics.pstdev([weight(r) * x for r in trained for x in r["rewards"]]) or 1.0
    examples = [
        {
            "input_ids": r["input_ids"],
            "choices": r["choices"],
            "rewards": r["rewards"],
            "weight": weight(r),
            "benign": r["benign"],
            "start_quote": r["start_quote"],
            "anchor": settings.benign_anchor if r["benign"] else 0.0,
        }
        for r in trained
    ]
    grammar = evidence_grammar(cfg, segments)
    trace: list[dict[str, Any]] = []
    fine_tune(
        cfg.policy.dtype,
        settings,
        model,
        tokenizer,
        examples,
        on_progress,
        choice_loss(grammar, cfg.episodes.temperature, segments.pad_id, scale, trace, settings.samples),
    )
    model.save_pretrained(str(out / ADAPTER_DIR))
    tokenizer.save_pretrained(str(out / ADAPTER_DIR))
    set_adapter_base(out / ADAPTER_DIR, portable_base(cfg.policy))

    def mean_over(benign: bool, value: Callable[[ChoiceRow], float]) -> float | None:
        values = [value(r) for r in data if r["choice"] and r["benign"] == benign]
        return statistics.fmean(values) if values else None

    start = lambda r: expected_reward(ChoiceScores(r["start_quote"], r["start_claim"]), r["rewards"])  # noqa: E731

    record = {
        "config": str(cfg.source) if cfg.source else None,
        "settings": settings.model_dump(),
        "rows": len(rows),
        "audits": len(data),
        "trained audits": {
            "planted": sum(not r["benign"] for r in trained),
            "benign": sum(r["benign"] for r in trained),
        },
        "left out": dropped,
        "reward scale": scale,
        "start's expected reward": {"planted": mean_over(False, start), "benign": mean_over(True, start)},
        "best expected reward": {
            "planted": mean_over(False, lambda r: max(r["rewards"])),
            "benign": mean_over(True, lambda r: max(r["rewards"])),
        },
        "expected reward by step": by_step(trace),
        "cpu_seconds": time.process_time() - cpu,
        "wall_seconds": time.perf_counter() - started,
        "adapter": str(out / ADAPTER_DIR),
    }
    atomic_write_text(out / RECORD_FILE, json.dumps(record, indent=2))
    return record
