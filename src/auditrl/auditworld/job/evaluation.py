"""The held-out evaluation of an AuditWorld job: every auditor, per training seed, into the report's row model.

Auditors come in three kinds: scripted baselines (the seeds change only the evaluation's draws), bases
(one policy per seed), and trained designs (one per seed, each paired with the base it started from,
so trained minus base is a per-seed difference). Each evaluation also renders a few transcripts for
the strategy analysis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from auditrl.auditworld.job.config import AuditWorldConfig
from auditrl.auditworld.metrics import (
    EvalEpisodes,
    SeedSpread,
    across_seeds,
    constant_metric_notes,
    evaluate_policy,
    paired_differences,
    pool,
)
from auditrl.auditworld.render import render_episodes
from auditrl.auditworld.world import Policy, World
from auditrl.evaluate.schema import SuiteResult
from auditrl.scaffold.transcript import Transcript

Kind = Literal["baseline", "base", "trained"]


@dataclass
class PolicyEvaluation:
    """One auditor's held-out evaluation: the suite's result type plus what only AuditWorld can measure."""

    name: str
    kind: Kind
    suite: SuiteResult
    diagnostics: dict[str, float]
    seeds: dict[str, SeedSpread]
    """Each headline metric across training seeds (each seed's mean one observation)."""
    constant: dict[str, str]
    """Why a metric took one value in every episode, by metric."""
    dimensions: dict[str, float]
    """Mean of each audit-quality dimension (0-100), pooled over seeds."""
    base: str | None = None
    """The base row a trained auditor started from."""
    delta: dict[str, SeedSpread] | None = None
    """Trained minus base per headline metric (per-seed differences, t-interval over seeds)."""


@dataclass
class Evaluated:
    """Every auditor's row, and the rendered transcripts with the auditor each came from."""

    rows: dict[str, PolicyEvaluation] = field(default_factory=dict)
    samples: list[Transcript] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    sample_seeds: list[int] = field(default_factory=list)
    """The training seed of each rendered transcript."""
    saved: list[Transcript] = field(default_factory=list)
    parts: dict[str, list[EvalEpisodes]] = field(default_factory=dict)

    def add(
        self,
        world: World,
        cfg: AuditWorldConfig,
        name: str,
        kind: Kind,
        seeded: Sequence[tuple[int, Policy]],
        base: str | None = None,
    ) -> PolicyEvaluation:
        """Evaluate one auditor over its seeds (each seed's draws fixed by the seed) and add its row."""
        n = cfg.analysis.transcripts_per_policy
        keep = cfg.analysis.transcripts_saved
        parts: list[EvalEpisodes] = []
        for seed, policy in seeded:
            values, planted, benign = evaluate_policy(
                world, policy, cfg.evaluation, np.random.default_rng(10_000 + seed), cfg.judge
            )
            parts.append(values)
            batch = [
                *render_episodes(world, planted, range(min(n, planted.batch.size)), name, f"s{seed}-planted"),
                *render_episodes(world, benign, range(min(n, benign.batch.size)), name, f"s{seed}-benign"),
            ]
            self.samples += batch
            self.saved += batch[:keep] + batch[n : n + keep]
            self.groups += [name] * len(batch)
            self.sample_seeds += [seed] * len(batch)
        pooled = pool(parts)
        seeds = [seed for seed, _ in seeded]
        row = PolicyEvaluation(
            name=name,
            kind=kind,
            suite=pooled.suite_result(name),
            diagnostics=pooled.diagnostics(),
            seeds=across_seeds(parts, seeds),
            constant=constant_metric_notes(pooled),
            dimensions=pooled.dimensions(),
            base=base,
            delta=paired_differences(parts, self.parts[base], seeds) if base is not None else None,
        )
        self.parts[name] = parts
        self.rows[name] = row
        return row
