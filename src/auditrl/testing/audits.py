"""The audits the contract checks score: simulated AuditWorld batches, rendered to transcripts.

Rendered AuditWorld transcripts carry natural-language messages, reports and ground-truth annotations, so
every judge family can read them (the programmatic family reads the annotations, the `sim` family the
words), and the same batch's `Observed` record is what a design's vectorised form scores. Each batch comes
with references for reference designs: one rollout per context of another scripted policy on the same
batch. Batches are deterministic and built once per process.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from auditrl.auditworld.judges import default_world
from auditrl.auditworld.policies import ExperimenterPolicy, InterrogatorPolicy, RandomPolicy
from auditrl.auditworld.records import Observed
from auditrl.auditworld.render import render_episodes
from auditrl.auditworld.simulate import simulate
from auditrl.auditworld.transcript_judges import SimPairwiseJudge
from auditrl.auditworld.world import training_batch
from auditrl.rewards.reference import ReferenceStore
from auditrl.scaffold.transcript import Transcript

GROUP_SIZE = 4
GROUPS = 6
MAX_TURNS = 15
BENIGN_FRACTION = 0.5
BATCHES: tuple[tuple[str, str, int], ...] = (
    ("interrogator", "experimenter", 2),
    ("experimenter", "interrogator", 3),
    ("random", "experimenter", 8),
)
"""(policy scored, policy of the references, seed) per batch. The random policy's batch at seed 8 holds an
audit whose claim only the auditor's own accusations support, where the lenient and strict binary judges
disagree (about one audit in a hundred does)."""


@dataclass(frozen=True)
class AuditBatch:
    """One simulated AuditWorld batch: its record, its rendered transcripts and their references."""

    observed: Observed
    transcripts: tuple[Transcript, ...]
    """One per rollout, in the record's row order; every `group_size` consecutive ones are a group."""
    group_size: int
    references: tuple[Transcript, ...]
    """One per context, played by the other scripted policy (a reference design's earlier snapshot)."""

    def groups(self) -> list[list[Transcript]]:
        k = self.group_size
        return [list(self.transcripts[i : i + k]) for i in range(0, len(self.transcripts), k)]

    def planted_groups(self) -> list[list[Transcript]]:
        return [g for g in self.groups() if not g[0].benign]

    def benign_groups(self) -> list[list[Transcript]]:
        return [g for g in self.groups() if g[0].benign]

    def reference_store(self) -> ReferenceStore:
        """A fresh store holding this batch's references (designs only read it; callers may replace it)."""
        store = ReferenceStore()
        store.replace(0, self.references)
        return store

    def reference_scores(self) -> tuple[NDArray[np.float64], NDArray[np.uint64]]:
        """The `sim` pairwise judge's score and record key of each rollout's reference, for vectorised forms."""
        store = self.reference_store()
        refs = [store.get(ReferenceStore.key_of(t)) for t in self.transcripts]
        missing = [t.id for t, r in zip(self.transcripts, refs, strict=True) if r is None]
        if missing:
            raise RuntimeError(f"rollouts without a reference: {missing[:3]}")
        return SimPairwiseJudge(default_world()).quality([r for r in refs if r is not None])


@functools.cache
def audit_batch(index: int) -> AuditBatch:
    """The contract checks' batch `index` (of `BATCHES`): half planted groups, half benign ones."""
    world = default_world()
    policies = {p.name: p for p in (InterrogatorPolicy(), ExperimenterPolicy(), RandomPolicy())}
    scored_name, reference_name, seed = BATCHES[index]
    scored, reference = policies[scored_name], policies[reference_name]
    families = list(range(len(world.families.names)))
    batch = training_batch(world, np.random.default_rng(seed), GROUPS, GROUP_SIZE, BENIGN_FRACTION, families, MAX_TURNS)
    rollout = simulate(world, batch, scored, np.random.default_rng(seed))
    transcripts = render_episodes(world, rollout, range(rollout.batch.size), scored.name)
    other = simulate(world, batch, reference, np.random.default_rng(seed + 100))
    references = render_episodes(
        world, other, range(0, other.batch.size, GROUP_SIZE), reference.name, run_tag="reference"
    )
    return AuditBatch(rollout.observed, tuple(transcripts), GROUP_SIZE, tuple(references))


def audit_batches() -> tuple[AuditBatch, ...]:
    return tuple(audit_batch(i) for i in range(len(BATCHES)))
