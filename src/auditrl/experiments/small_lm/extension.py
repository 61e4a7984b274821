"""The small-model experiment attached to the GRPO trainer: each of its settings (auditrl.experiments.small_lm.
settings) as the trainer's hooks (auditrl.train.extensions).

- before the first step: the curriculum's rows (`planted_groups`), the starting policy's claim rates and verdicts
  (`claim_rate_target: start`, `expected_verdict: start`);
- each turn: claim exploration and the report grammar constrain the report turn; the probing teacher writes the
  turns before it (`probing: teacher`);
- after the rollouts: the report's quote positions, which alone train under `trained_tokens: quote`;
- in the reward: the claim cost (`claim_rate_target`) and the quote's own reward (`quote_credit`), which becomes the
  quote tokens' advantage.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from auditrl.experiments.small_lm.claim_threshold import HISTORY_FILE as CLAIM_COST_FILE
from auditrl.experiments.small_lm.claim_threshold import START_RATES_FILE, ClaimThreshold, start_claim_rates
from auditrl.experiments.small_lm.constraints import FirstTokens, ReportConstraint, claim_tokens, quote_sources
from auditrl.experiments.small_lm.curriculum import screen, shown_rows, write_screening
from auditrl.experiments.small_lm.probing import TeacherProbing, teacher_probing
from auditrl.experiments.small_lm.report_choices import quote_opening, score_rows
from auditrl.experiments.small_lm.report_grammar import QuoteSources, ReportGrammar, report_grammar
from auditrl.experiments.small_lm.settings import SmallLMSettings, claims_per_group, small_lm
from auditrl.experiments.small_lm.start_verdict import START_VERDICTS_FILE, StartVerdict, start_verdicts
from auditrl.rewards.advantages import trl_advantages
from auditrl.scaffold.report import evidence_as_claim
from auditrl.scaffold.transcript import Report, Transcript
from auditrl.scaffold.transcript_keys import CLAIM_FORCED, CLAIM_PROBABILITY, REWARD_DETAILS
from auditrl.train.config import GRPOLMConfig
from auditrl.train.episodes import AuditEpisodeFactory
from auditrl.train.extensions import RunSetup, Scorer, StepTrainer, TrainingExtension
from auditrl.train.generation import Sample
from auditrl.train.rollout import ChatSegments, EpisodeFactory, EpisodeRow, RolloutBatch, RolloutState, TurnGenerator

QUOTE_POSITIONS = "quote_positions"
"""RolloutState.notes key: the trained completion positions of the report's quote (those before its verdict)."""


class SmallLMExtension(TrainingExtension):
    """The experiment's hooks for one run (`cfg` with its `experiment:` section)."""

    def __init__(self, cfg: GRPOLMConfig) -> None:
        self.cfg = cfg
        self.settings: SmallLMSettings = small_lm(cfg)
        self.grammar: ReportGrammar | None = None
        self.claim_tokens: tuple[frozenset[int], ...] = ()
        self.claims_per_group = claims_per_group(self.settings.claim_exploration, cfg.data.group_size)
        self.claim_planted_only = self.settings.claim_exploration_targets == "planted"
        self.quote_sources: Callable[[Transcript], list[list[int]]] | None = None
        self.probing: TeacherProbing | None = None
        self.threshold: ClaimThreshold | None = None
        """With claim_rate_target, the cost charged on every claim to hold the benign claim rate."""
        self.verdict: StartVerdict | None = None
        """With expected_verdict: start, the starting policy's P(claim) after each quote of the training rows."""
        self.last_quote_rewards: list[float | None] = []
        """Under quote credit, each audit's quote's reward, for every rank's audits of the last step; the trainer
        turns it into the quote's advantage."""

    def bind(self, segments: ChatSegments) -> None:
        """Tokenize what the constraints need (the claim's tokens, the grammar's fixed words) for this policy."""
        s, episodes, tokenizer = self.settings, self.cfg.episodes, segments.tokenizer
        self.grammar = report_grammar(
            s.report_grammar, tokenizer, episodes.auditor_prompt, segments.eos_ids, episodes.report_tokens, s.quote_unit
        )
        self.claim_tokens = claim_tokens(tokenizer, episodes.auditor_prompt) if self.claims_per_group else ()
        if self.grammar is not None:
            self.claim_tokens = self.claim_tokens[:1]  # the grammar writes the claim's keys once its verdict is drawn
        self.quote_sources = quote_sources(s.report_grammar, s.quote_unit, tokenizer)

    def training_rows(self, rows: list[EpisodeRow], setup: RunSetup) -> list[EpisodeRow]:
        if self.settings.planted_groups == "all":
            return rows
        screening = screen(self.cfg, ChatSegments(setup.tokenizer), *setup.sources)
        if setup.is_main_process:
            write_screening(setup.run_dir, screening)
        return shown_rows(self.cfg, rows, screening)

    def start(self, rows: Sequence[EpisodeRow], setup: RunSetup) -> None:
        """What training holds the policy to: the claim threshold, under `start` the starting policy's exact claim
        rate on each benign row, and the starting policy's verdict after every quote of the training rows. The main
        process scores the starting policy once, before any step has moved it, and keeps what each needs in the run,
        so a resumed run reads what its first steps were held to; the others read it."""
        s = self.settings
        needed = (
            rows if s.expected_verdict == "start" else [r for r in rows if r.benign]
        )  # the threshold reads benign rows
        scored = functools.cache(
            lambda: score_rows(self.cfg, setup.model, setup.tokenizer, *setup.sources, list(dict.fromkeys(needed)))
        )
        if s.claim_rate_target is not None:
            target = s.claim_rate_target
            rates = (
                setup.kept_in_run(START_RATES_FILE, lambda: start_claim_rates(scored()))
                if target == "start"
                else target
            )
            self.threshold = ClaimThreshold(rates, s.claim_cost_step, setup.run_dir / CLAIM_COST_FILE)
        if s.expected_verdict == "start":
            table = setup.kept_in_run(START_VERDICTS_FILE, lambda: start_verdicts(scored()))
            self.verdict = StartVerdict(table, quote_opening(self.cfg))

    def generator(
        self, generator: TurnGenerator, factory: EpisodeFactory, segments: ChatSegments
    ) -> tuple[TurnGenerator, EpisodeFactory]:
        self.bind(segments)
        if self.settings.probing != "teacher":
            return generator, factory
        if not isinstance(factory, AuditEpisodeFactory):
            raise TypeError("experiment.probing: teacher needs the config's own episodes (an AuditEpisodeFactory)")
        self.probing = teacher_probing(self.cfg.episodes, self.settings.probing_teacher, generator, factory, segments)
        return self.probing, self.probing.factory

    def constraint(self, live: Sequence[RolloutState], group_size: int, references: bool) -> ReportConstraint | None:
        """Claim exploration in the first `claims_per_group` rollouts of each group (with `planted` targets, of
        planted groups only; never in reference rollouts); the report grammar on every report turn."""
        if self.claims_per_group and not self.claim_tokens:
            raise ValueError("claim exploration needs the claim's verdict tokens")
        planted_only = self.claim_planted_only
        first: FirstTokens = [
            self.claim_tokens
            if not references
            and self.claims_per_group
            and s.rollout_index % group_size < self.claims_per_group
            and s.episode.phase == "report"
            and not (planted_only and s.row.benign)
            else None
            for s in live
        ]
        for state, tokens in zip(live, first, strict=True):
            if tokens:
                CLAIM_FORCED.set(state.episode.transcript, True)
        sources = self.quote_sources
        quotes: QuoteSources = [
            sources(s.episode.transcript) if sources is not None and s.episode.phase == "report" else None for s in live
        ]
        constraint = ReportConstraint(self.grammar, first, quotes, self.cfg.episodes.temperature)
        return constraint if constraint.active() else None

    def sampled(self, state: RolloutState, sample: Sample, start: int) -> None:
        """Record the policy's P(claim) at its verdict, and the trained positions of the quote before it."""
        p = sample.notes.get("claim_probability")
        if p is not None:
            CLAIM_PROBABILITY.set(state.episode.transcript, p)
        at = sample.notes.get("verdict_at")
        if at is not None and at < len(sample.ids):
            trained = [start + i for i in range(at) if sample.logprobs[i] is not None and i not in sample.forced]
            state.notes.setdefault(QUOTE_POSITIONS, []).extend(trained)

    def finished(self, batch: RolloutBatch) -> None:
        if self.probing is not None:
            self.probing.mark(batch.transcripts)

    def trl_fields(self, batch: RolloutBatch, fields: dict[str, Any]) -> None:
        """The quote mask (1 at the trained positions of the report's quote) for the quote's own advantage, and
        under `trained_tokens: quote` in place of the tokens trained on."""
        if self.settings.report_grammar == "free":
            return
        masks = [quote_mask(notes, len(ids)) for notes, ids in zip(batch.notes, batch.completion_ids, strict=True)]
        fields["quote_mask"] = masks
        if self.settings.trained_tokens == "quote":
            fields["env_mask"] = masks

    def adjust_rewards(
        self, step: int, transcripts: list[Transcript], rewards: list[float | None], score: Scorer
    ) -> tuple[list[float | None], Any]:
        """The claim cost taken off every claim; under quote credit, each quote's own reward (shared with every
        rank)."""
        if self.threshold is not None:
            rewards = self.threshold.charge(step, transcripts, rewards)
            for t in transcripts:
                REWARD_DETAILS.set(t, {**(REWARD_DETAILS.get(t) or {}), "claim_cost": self.threshold.charged})
        quote_rewards = self.quote_rewards(transcripts, score) if self.settings.quote_credit != "rollout" else []
        return rewards, quote_rewards

    def receive(self, shared: Any) -> None:
        self.last_quote_rewards = list(shared or [])

    def metrics(self) -> dict[str, float]:
        return {"claim_cost": self.threshold.charged} if self.threshold is not None else {}

    def quote_rewards(self, transcripts: list[Transcript], score: Scorer) -> list[float | None]:
        """What each audit's quote earns: under `claim`, what a claim quoting its evidence earns (every report turned
        into that claim, a claim is one already, and the groups scored again by the same design, since a pairwise
        design ranks a claim against its group's; so the judge calls double); under `expected`, that times the
        policy's own P(claim) after the quote (or its start's, with `verdict`) plus silence's reward (the groups
        scored a third time, every report "nothing found") times the rest. None where the report quoted no evidence
        or, under `expected`, where there is no such P(claim). Stored in each audit's reward details: `quote_reward`
        (the claim's), and under `expected` `silence_reward`, `expected_quote_reward` and, with `verdict`,
        `start_claim_probability`."""
        expected = self.settings.quote_credit == "expected"
        claims = [evidence_as_claim(t) for t in transcripts]
        scored = score([c if c is not None else t for t, c in zip(transcripts, claims, strict=True)])
        silent = [t.model_copy(update={"report": Report(no_behavior_found=True)}) for t in transcripts]
        silences = [r for r, _ in score(silent)] if expected else [None] * len(transcripts)
        rewards: list[float | None] = []
        for t, claim, (claimed, _), quiet in zip(transcripts, claims, scored, silences, strict=True):
            reward = claimed if claim is not None else None
            details = {**(REWARD_DETAILS.get(t) or {}), "quote_reward": reward}
            if expected:
                p = CLAIM_PROBABILITY.get(t)
                if self.verdict is not None:
                    report = claim.report if claim is not None else None
                    p = (
                        self.verdict.claim_probability(t, report.predictions[0].description)
                        if report is not None
                        else None
                    )
                    details["start_claim_probability"] = p
                both = (
                    None
                    if reward is None or quiet is None or p is None
                    else float(p) * reward + (1.0 - float(p)) * quiet
                )
                details |= {"silence_reward": quiet, "expected_quote_reward": both}
                reward = both
            rewards.append(reward)
            REWARD_DETAILS.set(t, details)
        return rewards

    def advantages(self, scored: dict[str, Any], trainer: StepTrainer, fields: dict[str, Any]) -> torch.Tensor:
        """Under quote credit, per-position advantages: the quote's own group-relative advantage at its positions
        (of what a claim quoting it earns, or the report in expectation over the verdict), the audit's elsewhere."""
        advantages = scored["advantages"]
        if self.settings.quote_credit == "rollout" or "quote_mask" not in fields:
            return advantages
        quote_mask = trainer.padded(fields["quote_mask"], 0)
        width = scored["completion_ids"].shape[1]
        rows = advantages.shape[0]
        if trainer.num_generations is None:
            raise ValueError("trainer.num_generations is unset, so the quote rewards cannot be grouped")
        every = trl_advantages(self.last_quote_rewards, trainer.num_generations, trainer.scale_rewards)
        start = trainer.accelerator.process_index * rows
        if len(every) < start + rows:
            raise RuntimeError(f"{len(every)} quote rewards for the rows {start}-{start + rows} of this rank")
        quote = torch.tensor(every[start : start + rows], dtype=advantages.dtype, device=advantages.device)
        if tuple(quote_mask.shape) != (rows, width):
            raise RuntimeError(f"quote mask {tuple(quote_mask.shape)} does not match the {rows} x {width} completions")
        mask = quote_mask.to(advantages.device).bool()
        return torch.where(mask, quote.unsqueeze(1), advantages.unsqueeze(1).expand_as(mask))


def quote_mask(notes: dict[str, Any], length: int) -> list[int]:
    """1 at a rollout's trained quote positions, 0 elsewhere."""
    quoted = set(notes.get(QUOTE_POSITIONS, ()))
    return [int(i in quoted) for i in range(length)]
