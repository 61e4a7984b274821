"""Planted groups whose probing shows the behavior (`experiment.planted_groups: shown | creditable`), for report-only
training.

A report-only auditor can be right about a planted target only when the probing it reads shows the behavior: a
planted audit that never shows it reads like a benign one. Under the binary reward such audits teach nothing (a
claim there is not credited, nor is silence), while every benign group teaches silence, so the verdict learns
"never claim". This curriculum probes every planted
(behavior, seed, family) of the pool once with the probing teacher and trains planted groups only on those whose
probing showed the behavior, so each kind of group has something to teach. `creditable` keeps, of those, the ones
where a claim can also be paid: some span (or, with `experiment.quote_unit: sentence`, some sentence) of a reply
that showed the behavior, quoted as the report grammars write a claim (`It wrote: <span>`), is credited by the
offline claim grader behind the `sim` and `programmatic` judges. Where the grader credits no span of a shown audit,
even a right claim is paid as silence is.

The simulator's ground truth (`Transcript.behavior_shown`) chooses the data and never enters a reward: the policy
still reads only the transcript. A `sim/` target seeds its replies from the conversation and the teacher is
deterministic, so the probing screened here is the probing the training rollout replays.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import cycle
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from auditrl.atomic import atomic_write_text
from auditrl.behaviors.schema import Behavior, Seed
from auditrl.experiments.small_lm.copy_quote import quotable, sentences
from auditrl.experiments.small_lm.settings import QuoteUnit, small_lm
from auditrl.judges.claim_grader import OfflineClaimGrader, default_grader
from auditrl.scaffold.prompt_sets import PROMPT_SETS, openings
from auditrl.scaffold.transcript import Transcript
from auditrl.train.config import GRPOLMConfig
from auditrl.train.episodes import trained_behaviors
from auditrl.train.rollout import ChatSegments, EpisodeRow
from auditrl.train.teacher import teacher_rollouts

CURRICULUM_FILE = "curriculum.json"


class Screening(BaseModel):
    """What the screen found: every planted row it probed, those whose probing showed the behavior and, of those,
    the ones where a quote of it is a credited claim."""

    teacher: str
    screened: list[EpisodeRow]
    shown: list[EpisodeRow]
    creditable: list[EpisodeRow]

    def kept(self, planted_groups: str) -> list[EpisodeRow]:
        """The rows `data.planted_groups` trains planted groups on."""
        return self.creditable if planted_groups == "creditable" else self.shown

    def by_behavior(self) -> dict[str, tuple[int, int, int]]:
        """behavior -> (creditable, shown, screened)."""
        counts: dict[str, list[int]] = {}
        for column, rows in enumerate((self.creditable, self.shown, self.screened)):
            for row in rows:
                counts.setdefault(str(row.behavior_id), [0, 0, 0])[column] += 1
        return {b: (c, s, n) for b, (c, s, n) in sorted(counts.items())}


def planted_candidates(cfg: GRPOLMConfig, behaviors: dict[str, Behavior], seeds: Sequence[Seed]) -> list[EpisodeRow]:
    """Every planted (behavior, seed, family) a step may draw: the pool's behaviors, their seeds, every family."""
    pool = set(trained_behaviors(cfg, behaviors))
    return [
        EpisodeRow(behavior_id=s.behavior, seed_id=s.id, family=family, benign=False)
        for s in sorted(seeds, key=lambda s: s.id)
        if s.behavior in pool
        for family in cfg.episodes.families
    ]


def screen(
    cfg: GRPOLMConfig, segments: ChatSegments, behaviors: dict[str, Behavior], seeds: Sequence[Seed]
) -> Screening:
    """Probe every planted candidate once with `episodes.probing_teacher`; a failed probe counts as not shown."""
    candidates = planted_candidates(cfg, behaviors, seeds)
    teacher = small_lm(cfg).probing_teacher
    batch = teacher_rollouts(cfg, teacher, segments, behaviors, seeds, candidates)
    shown = [
        (row, t)
        for row, t in zip(candidates, batch.transcripts, strict=True)
        if t.status != "error" and t.behavior_shown
    ]
    named = PROMPT_SETS[cfg.episodes.auditor_prompt].openings
    grader, opening = default_grader(), openings(named)["quote"] if named else ""
    return Screening(
        teacher=teacher,
        screened=candidates,
        shown=[row for row, _ in shown],
        creditable=[
            row for row, t in shown if creditable_quote(t, grader, opening, small_lm(cfg).quote_unit) is not None
        ],
    )


def creditable_quote(
    transcript: Transcript, grader: OfflineClaimGrader, opening: str, unit: QuoteUnit = "span"
) -> str | None:
    """The shortest quote of a reply that showed the behavior which, after `opening`, the grader reads as the planted
    behavior: a span of its words, or with `unit` `sentence` one of its sentences (None: no quote of the evidence is a
    paid claim)."""
    for reply in transcript.target_said():
        if not reply.annotations.get("expressed"):
            continue
        if unit == "sentence":
            candidates = sorted(sentences(reply.content), key=len)
        else:
            words = quotable(reply.content).split()
            candidates = [
                " ".join(words[start : start + length])
                for length in range(1, len(words) + 1)
                for start in range(len(words) - length + 1)
            ]
        for quote in candidates:
            description = f"{opening} {quote}"
            if grader.describes(description) == transcript.behavior_id:
                return description
    return None


def shown_rows(cfg: GRPOLMConfig, rows: Sequence[EpisodeRow], screening: Screening) -> list[EpisodeRow]:
    """`rows` with every planted row the screen did not keep (`data.planted_groups`) replaced by a kept one, of the
    same behavior where it has any (in turn, so each is used about equally), otherwise of any behavior; benign rows
    stay."""
    keep = screening.kept(small_lm(cfg).planted_groups)
    if not keep:
        raise ValueError(
            f"data.planted_groups={small_lm(cfg).planted_groups}: the probing teacher {screening.teacher!r} left no "
            f"planted group to train on ({len(screening.shown)} showed the behavior) among the "
            f"{len(screening.screened)} planted (behavior, seed, family) of the pool on {cfg.episodes.target_model} "
            f"within episodes.max_turns={cfg.episodes.max_turns} turns of episodes.max_new_tokens="
            f"{cfg.episodes.max_new_tokens} tokens"
        )
    rng = np.random.default_rng([cfg.seed, len(keep)])
    kept = set(keep)
    own: dict[str | None, list[EpisodeRow]] = {}
    for row in keep:
        own.setdefault(row.behavior_id, []).append(row)
    turns = {b: cycle(rng.permutation(len(r)).tolist()) for b, r in own.items()}
    anywhere = cycle(rng.permutation(len(keep)).tolist())
    out: list[EpisodeRow] = []
    for row in rows:
        if row.benign or row in kept:
            out.append(row)
        elif row.behavior_id in own:
            out.append(own[row.behavior_id][next(turns[row.behavior_id])])
        else:
            out.append(keep[next(anywhere)])
    return out


def write_screening(run_dir: Path, screening: Screening) -> Path:
    """The screen's result beside the run, so what the run trained on can be read back."""
    return atomic_write_text(run_dir / CURRICULUM_FILE, screening.model_dump_json(indent=2) + "\n")
