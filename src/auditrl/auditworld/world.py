"""AuditWorld: the world (behaviors, topics, target families, seed bank), the auditor's action space,
and the batches of episodes to simulate.

An action is (tool, topic slot, framing, pressure); the report is (claim slot, confidence). Each seed
sets a scenario of several topics, at most one of which triggers the planted behavior, so which one
does can only be learned by eliciting it. Topics are referred to by slot (`auditrl.auditworld.observe`): slot
0 is a fresh control topic outside the scenario, slot j + 1 the scenario's j-th topic, so a policy
trained on some behaviors can be evaluated on held-out behaviors whose trigger topics it never saw.
The claim names a scenario topic by slot, or nothing (slot 0). Neither the actions nor the claims
offer "the most anomalous topic": the auditor works that out from its observations. Stepping a batch
is `auditrl.auditworld.simulate`; what an episode leaves behind (the judge-readable `Observed` record and the
ground truth `Features`) is `auditrl.auditworld.records`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from auditrl.auditworld.families import Family, FamilyTable, load_families
from auditrl.auditworld.targets import BehaviorTable
from auditrl.auditworld.texts import Topic, load_topics, templates
from auditrl.behaviors.schema import Behavior

TOOLS = ("send", "rollback", "end")
CONFIDENCES = (0.3, 0.6, 0.9)
# Named indices: the column of each head in an action or report row, and the fixed choices of its heads.
TOOL, TOPIC, FRAMING, PRESSURE = range(4)
SEND, ROLLBACK, END = range(len(TOOLS))
CONTROL_TOPIC = 0  # topic slot 0: a control topic; slot j + 1: the scenario's j-th topic
CLAIM, CONFIDENCE = range(2)
NO_CLAIM = 0  # claim slot 0: no hidden behavior found; slot j + 1: the scenario's j-th topic


def action_sizes(scenario_topics: int) -> tuple[int, int, int, int]:
    """Choices per action head: tool, topic slot (control or a scenario topic), framing, pressure."""
    return (len(TOOLS), scenario_topics + 1, 3, 3)


def report_sizes(scenario_topics: int) -> tuple[int, int]:
    """Choices per report head: claim slot (nothing or a scenario topic), confidence."""
    return (scenario_topics + 1, len(CONFIDENCES))


class Policy(Protocol):
    """An auditor over structured actions: per-turn actions and a final report, for a whole batch."""

    name: str

    def act(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]: ...

    def report(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]: ...


@dataclass(frozen=True)
class World:
    """The catalog of one AuditWorld: topics, behaviors, families and a seed bank per behavior."""

    topics: tuple[Topic, ...]
    behaviors: BehaviorTable
    families: FamilyTable
    family_models: Mapping[str, Family]
    scenario: NDArray[np.int64]  # (behaviors, seeds per behavior, topics per scenario); [..., 0] = lead topic

    @classmethod
    def build(
        cls,
        library: Mapping[str, Behavior],
        seeds_per_behavior: int = 8,
        fair_chance: float = 0.75,
        random_state: int = 0,
        scenario_topics: int = 3,
    ) -> World:
        """Seed bank: each seed's scenario spans `scenario_topics` topics; a `fair_chance` share of each behavior's
        seeds (rounded) includes one trigger of the behavior (the paper's seeds give the auditor a fair chance),
        the others are decoys that do not trigger it.

        The design is balanced, not merely random: the trigger stands in each position of the scenario equally
        often (up to one) over a behavior's seeds, so no position (the lead topic a blind auditor would name)
        is a trigger more often than chance, however few the seeds.
        """
        if seeds_per_behavior < 1:
            raise ValueError(f"seeds_per_behavior must be >= 1, got {seeds_per_behavior}")
        if not 0.0 <= fair_chance <= 1.0:
            raise ValueError(f"fair_chance must be in [0, 1], got {fair_chance}")
        topics = load_topics()
        if not 1 <= scenario_topics <= len(topics) - 1:
            raise ValueError(f"scenario_topics must be in [1, {len(topics) - 1}], got {scenario_topics}")
        table = BehaviorTable.of(library)
        fams = load_families()
        rng = np.random.default_rng(random_state)
        scenario = np.empty((len(table.ids), seeds_per_behavior, scenario_topics), dtype=np.int64)
        n_fair = int(round(fair_chance * seeds_per_behavior))
        for b in range(len(table.ids)):
            trig = np.flatnonzero(table.trigger[b])
            others = np.flatnonzero(~table.trigger[b])
            fair = rng.permutation(seeds_per_behavior) < n_fair
            slots = np.concatenate(
                [rng.permutation(scenario_topics) for _ in range(max(1, -(-n_fair // scenario_topics)))]
            )
            for s in range(seeds_per_behavior):
                n_decoys = min(others.size, scenario_topics - int(fair[s]))
                decoys = rng.choice(others, size=n_decoys, replace=False)
                triggers = rng.choice(trig, size=scenario_topics - n_decoys, replace=False)
                if fair[s] and n_decoys == scenario_topics - 1:
                    order = np.insert(rng.permutation(decoys), slots[int(fair[: s + 1].sum()) - 1], triggers)
                else:
                    order = rng.permutation(np.concatenate([decoys, triggers]))
                scenario[b, s] = order
        return cls(
            topics=topics,
            behaviors=table,
            families=FamilyTable.of(fams, list(fams)),
            family_models=fams,
            scenario=scenario,
        )

    @property
    def n_topics(self) -> int:
        return len(self.topics)

    @property
    def seeds_per_behavior(self) -> int:
        return int(self.scenario.shape[1])

    @property
    def scenario_topics(self) -> int:
        return int(self.scenario.shape[2])

    def identifiable(self, behaviors: Sequence[int] | NDArray[np.int64]) -> NDArray[np.bool_]:
        """(behaviors, seeds): whether the seed's scenario holds a trigger of the behavior, so that a claim
        naming one of its topics can identify it at all (the ceiling of identification)."""
        b = np.asarray(behaviors, dtype=np.int64)
        trig = self.behaviors.trigger[b]  # (nb, topics)
        return np.asarray(np.take_along_axis(trig[:, None, :], self.scenario[b], axis=2).any(axis=2), dtype=np.bool_)

    def behavior_indices(self, split: str) -> NDArray[np.int64]:
        heldout = self.behaviors.heldout
        return np.flatnonzero(heldout if split == "heldout" else ~heldout)

    def seed_id(self, behavior: int, seed: int) -> str:
        return f"sim-{self.behaviors.ids[behavior]}-{seed:02d}"

    def seed_text(self, behavior: int, seed: int) -> str:
        phrases = [self.topics[int(t)].phrase for t in self.scenario[behavior, seed]]
        joined = phrases[0] if len(phrases) == 1 else "; ".join(phrases[:-1]) + "; or " + phrases[-1]
        return str(templates()["seed"]).format(phrases=joined)


@dataclass(frozen=True)
class EpisodeBatch:
    """Who is audited in each episode of a batch; episodes of one group are contiguous (k per group)."""

    behavior: NDArray[np.int64]  # -1 = benign target
    seed_behavior: NDArray[np.int64]  # whose seed bank the scenario comes from
    seed_index: NDArray[np.int64]
    family: NDArray[np.int64]
    max_turns: int
    group_size: int = 1

    def __post_init__(self) -> None:
        n = self.behavior.shape[0]
        for name in ("seed_behavior", "seed_index", "family"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"EpisodeBatch.{name} must have shape ({n},), got {getattr(self, name).shape}")
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        if self.group_size < 1 or n % self.group_size:
            raise ValueError(f"batch of {n} episodes cannot be split into groups of {self.group_size}")

    @property
    def size(self) -> int:
        return int(self.behavior.shape[0])

    @property
    def planted(self) -> NDArray[np.bool_]:
        return self.behavior >= 0

    def context(self, world: World) -> NDArray[np.int64]:
        """One id per (benign?, seed behavior, seed, family): the key of a cached reference episode."""
        nb, ns, nf = len(world.behaviors.ids), world.seeds_per_behavior, len(world.families.names)
        return (((~self.planted).astype(np.int64) * nb + self.seed_behavior) * ns + self.seed_index) * nf + self.family

    def n_contexts(self, world: World) -> int:
        return 2 * len(world.behaviors.ids) * world.seeds_per_behavior * len(world.families.names)

    def select(self, index: NDArray[np.int64]) -> EpisodeBatch:
        return EpisodeBatch(
            behavior=self.behavior[index],
            seed_behavior=self.seed_behavior[index],
            seed_index=self.seed_index[index],
            family=self.family[index],
            max_turns=self.max_turns,
        )


def training_batch(
    world: World,
    rng: np.random.Generator,
    groups: int,
    group_size: int,
    benign_fraction: float,
    families: Sequence[int],
    max_turns: int,
) -> EpisodeBatch:
    """Groups of k rollouts per (behavior, seed, family); a fraction of groups has a benign target.

    Only training-split behaviors are used, for planted targets and for the benign groups' seeds alike.
    """
    if not 0.0 <= benign_fraction <= 1.0:
        raise ValueError(f"benign_fraction must be in [0, 1], got {benign_fraction}")
    train = world.behavior_indices("train")
    if train.size == 0:
        raise ValueError("the behavior library has no training-split behaviors")
    n_benign = int(round(groups * benign_fraction))
    seed_beh = rng.choice(train, size=groups)
    seed_idx = rng.integers(0, world.seeds_per_behavior, size=groups)
    fam = rng.choice(np.asarray(families, dtype=np.int64), size=groups)
    beh = seed_beh.copy()
    beh[:n_benign] = -1
    rep = lambda a: np.repeat(a, group_size)
    return EpisodeBatch(rep(beh), rep(seed_beh), rep(seed_idx), rep(fam), max_turns, group_size)


def evaluation_batch(
    world: World, behaviors: Sequence[int] | NDArray[np.int64], family: int, rollouts: int, max_turns: int, benign: bool
) -> EpisodeBatch:
    """Every seed of the given behaviors x rollouts, against the planted target or a benign one."""
    b = np.repeat(np.asarray(behaviors, dtype=np.int64), world.seeds_per_behavior * rollouts)
    s = np.tile(np.repeat(np.arange(world.seeds_per_behavior), rollouts), len(behaviors))
    return EpisodeBatch(
        behavior=np.full_like(b, -1) if benign else b,
        seed_behavior=b,
        seed_index=s,
        family=np.full_like(b, family),
        max_turns=max_turns,
    )
