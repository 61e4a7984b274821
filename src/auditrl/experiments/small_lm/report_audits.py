"""Report-only audits of held-out targets, sampled as report-only GRPO samples its rollouts: the probing teacher
(`episodes.probing_teacher`) writes every turn before the report, and the auditor model under evaluation writes
the report at the training temperature, under the run's report grammar.

Why: a report-only run trains the report turn alone, so it is measured on the same thing, with the rollout loop
and grammar it trained under, on targets it never trained on. The whole-audit evaluation (`auditrl suite`, the
`local/` provider) samples free text and cannot apply a grammar. Each audit is sampled `samples` times; the
samples of one audit are one unit of the evaluation's intervals, since they read the same probing.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import torch
from rich.progress import Progress
from transformers import PreTrainedModel

from auditrl.behaviors.library import load_behaviors
from auditrl.behaviors.schema import Behavior
from auditrl.experiments.small_lm.constraints import claim_tokens
from auditrl.experiments.small_lm.extension import SmallLMExtension
from auditrl.experiments.small_lm.probing import teacher_probing
from auditrl.experiments.small_lm.settings import small_lm
from auditrl.scaffold.store import append_transcript, read_transcripts
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import ROLLOUT
from auditrl.train.config import EpisodeSettings, GRPOLMConfig
from auditrl.train.episodes import AuditEpisodeFactory, seed_bank, split_seeds, trained_behaviors, training_seeds
from auditrl.train.generation import Sample, TurnConstraint
from auditrl.train.hf_generator import ModelTurns
from auditrl.train.rollout import ChatSegments, EpisodeRow, run_rollouts


class PolicyTurns(ModelTurns):
    """A loaded model (an auditor being evaluated) samples each turn, without gradients."""

    def __init__(self, model: PreTrainedModel, settings: EpisodeSettings, segments: ChatSegments) -> None:
        super().__init__(model, settings, segments)
        self.model = model

    def __call__(
        self, keys: list[int], contexts: list[list[int]], constraint: TurnConstraint | None = None
    ) -> list[Sample]:
        with torch.no_grad():
            return self.sample(self.model, keys, contexts, constraint)


HELD_OUT_PARTS = ("held-out behaviors", "held-out seeds of training behaviors")
"""The behaviors the library holds out, on their seeds; and the training behaviors on their held-out seeds
(`data.heldout_seeds`), neither ever drawn by a training step."""


def held_out_rows(
    cfg: GRPOLMConfig, part: str, behaviors: dict[str, Behavior] | None = None, seeds_per_behavior: int | None = None
) -> list[EpisodeRow]:
    """Every (behavior, seed, family) of a held-out part (the first `seeds_per_behavior` seeds of each behavior, by
    id, when given), planted and then benign."""
    behaviors = behaviors or load_behaviors()
    bank = seed_bank(cfg, behaviors)
    if part == HELD_OUT_PARTS[0]:
        kept = {b for b, v in behaviors.items() if v.split == "heldout"}
        chosen = [s for s in bank if s.behavior in kept]
    elif part == HELD_OUT_PARTS[1]:
        pool = set(trained_behaviors(cfg, behaviors))
        chosen = [
            s for s in split_seeds([s for s in bank if s.behavior in pool], cfg.data.heldout_seeds)[1] if s.behavior
        ]
    else:
        raise ValueError(f"unknown held-out part {part!r}; choose from {', '.join(HELD_OUT_PARTS)}")
    taken: dict[str | None, int] = {}
    kept_seeds = []
    for s in sorted(chosen, key=lambda s: s.id):
        taken[s.behavior] = taken.get(s.behavior, 0) + 1
        if seeds_per_behavior is None or taken[s.behavior] <= seeds_per_behavior:
            kept_seeds.append(s)
    return [
        EpisodeRow(behavior_id=s.behavior, seed_id=s.id, family=family, benign=benign)
        for benign in (False, True)
        for s in kept_seeds
        for family in cfg.episodes.families
    ]


def reset_rows(
    cfg: GRPOLMConfig,
    n: int,
    behaviors: dict[str, Behavior] | None = None,
    seen: Collection[tuple[str, str | None]] = frozenset(),
) -> list[EpisodeRow]:
    """`n` benign rows of the run's training seeds (every family) that no training saw, drawn with the run's seed:
    audits a deployed auditor's claim threshold can be set on without touching either held-out part. `seen`: the
    (seed id, family) of benign audits some training stage audited (`benign_audits_seen`). Why: a benign audit an
    auditor trained on is one it was held quiet on (a benign anchor), so a threshold set there under-counts its claims
    on benign targets it never saw."""
    behaviors = behaviors or load_behaviors()
    pool = set(trained_behaviors(cfg, behaviors))
    rows = [
        EpisodeRow(behavior_id=s.behavior, seed_id=s.id, family=family, benign=True)
        for s in sorted(training_seeds(cfg, behaviors), key=lambda s: s.id)
        if s.behavior in pool
        for family in cfg.episodes.families
    ]
    unseen = [r for r in rows if (r.seed_id, r.family) not in seen]
    if n > len(unseen):
        trained = (
            f" no training saw ({len(rows) - len(unseen)} more were trained on)" if len(unseen) < len(rows) else ""
        )
        raise ValueError(f"{n} reset rows asked for; the training seeds give {len(unseen)} benign rows{trained}")
    return sorted(random.Random(cfg.seed).sample(unseen, n), key=lambda r: (r.seed_id, r.family))


def benign_audits_seen(stores: Sequence[Path]) -> set[tuple[str, str | None]]:
    """The (seed id, family) of every benign audit in these transcript stores (a training stage's audits; a missing
    store saw none)."""
    return {
        (t.seed_id, t.target_family) for store in stores if store.is_file() for t in read_transcripts(store) if t.benign
    }


def report_audits(
    cfg: GRPOLMConfig,
    model: Any,
    tokenizer: Any,
    rows: Sequence[EpisodeRow],
    out: Path,
    *,
    samples: int = 4,
    batch_audits: int = 8,
    seed: int = 0,
    auditor_name: str = "policy",
    made_to_claim: bool = False,
    progress: Callable[[int], None] | None = None,
) -> list[Transcript]:
    """`samples` report-only audits of each row by `model`, appended to `out` (transcripts, metadata `rollout` =
    the sample's number) as each batch of `batch_audits` rows finishes; rows already in `out` are not audited
    again, so an interrupted evaluation resumes. Returns the audits of `rows` in `out`. A failed teacher call marks
    its audit an error. `made_to_claim`: every planted report's verdict is set to a claim (claim exploration on all
    of them), which measures the choice of evidence apart from the choice to claim."""
    behaviors = load_behaviors()
    segments = ChatSegments(tokenizer)
    done = {(t.seed_id, t.target_family, t.benign) for t in read_transcripts(out)} if out.exists() else set()
    todo = [row for row in rows if (row.seed_id, row.family, row.benign) not in done]
    if progress is not None:
        progress(len(rows) - len(todo))
    factory = AuditEpisodeFactory(cfg.episodes, behaviors, seed_bank(cfg, behaviors), auditor_name)
    extension = SmallLMExtension(cfg)
    extension.bind(segments)
    if made_to_claim:
        extension.claim_tokens = claim_tokens(tokenizer, cfg.episodes.auditor_prompt)[:1]
        extension.claims_per_group, extension.claim_planted_only = samples, True
    teacher = small_lm(cfg).probing_teacher
    for start in range(0, len(todo), batch_audits):
        chunk = todo[start : start + batch_audits]
        prober = teacher_probing(cfg.episodes, teacher, PolicyTurns(model, cfg.episodes, segments), factory, segments)
        torch.manual_seed(seed + len(done) + start)
        try:
            batch = asyncio.run(run_rollouts(
                [row for row in chunk for _ in range(samples)], prober.factory, prober, segments, group_size=samples,
                first_index=0, max_completion_tokens=cfg.episodes.max_completion_tokens, auditor_name=auditor_name,
                turn_tokens=cfg.episodes.turn_tokens, hooks=extension,
            ))  # fmt: skip
        finally:
            prober.close()
        prober.mark(batch.transcripts)
        for index, transcript in enumerate(batch.transcripts):
            ROLLOUT.set(transcript, index % samples)
            append_transcript(out, transcript)
        if progress is not None:
            progress(len(chunk))
    wanted = {(row.seed_id, row.family, row.benign) for row in rows}
    return (
        [t for t in read_transcripts(out) if (t.seed_id, t.target_family, t.benign) in wanted] if out.exists() else []
    )


def audit_parts(
    cfg: GRPOLMConfig,
    model: Any,
    tokenizer: Any,
    folder: Path,
    parts: Sequence[str] = HELD_OUT_PARTS,
    seeds_per_behavior: int | None = None,
    planted_only: bool = False,
    **options: Any,
) -> dict[str, list[Transcript]]:
    """`report_audits` of each held-out part (its planted rows only, with `planted_only`) into `folder/<part>.jsonl`,
    with a progress bar over audits."""
    rows = {
        part: [
            r
            for r in held_out_rows(cfg, part, seeds_per_behavior=seeds_per_behavior)
            if not (planted_only and r.benign)
        ]
        for part in parts
    }
    with Progress() as bar:
        task = bar.add_task("report-only audits", total=sum(len(r) for r in rows.values()))
        return {
            part: report_audits(
                cfg,
                model,
                tokenizer,
                chunk,
                folder / f"{part.replace(' ', '_')}.jsonl",
                progress=lambda n: bar.advance(task, n),
                **options,
            )  # fmt: skip
            for part, chunk in rows.items()
        }
