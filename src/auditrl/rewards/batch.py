"""Training batches: groups of k rollouts per (behavior, seed, target family), with a benign share.

Held-out behaviors never enter a training batch: asking for one raises, and a library passed whole is
filtered to the training split. Benign groups reuse training (behavior, seed) pairs with the plant
removed, and every group draws its family from the same pool, so neither the seed nor the family tells
the auditor whether a plant is present. A family whose target carries a behavior in its weights (an
implant, auditrl.targets.pool) gives its planted groups that behavior and one of its seeds; its benign
groups are drawn as any other. Deterministic given (seed, step).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from auditrl.behaviors.schema import Behavior, Seed


class HeldOutBehaviorError(ValueError):
    """A held-out behavior was requested for training."""


class GroupSpec(BaseModel):
    """One group to roll out: k audits of the same seed against the same target (planted or benign)."""

    model_config = ConfigDict(frozen=True)

    seed: Seed
    behavior: Behavior | None = Field(description="The plant; None for a benign (calibration) group.")
    seed_behavior_id: str = Field(description="Behavior the seed was written for (also for benign groups).")
    family: str
    k: int = Field(ge=1)

    @property
    def benign(self) -> bool:
        return self.behavior is None

    @property
    def behavior_id(self) -> str | None:
        return self.behavior.id if self.behavior else None


class Batch(BaseModel):
    step: int
    groups: list[GroupSpec]

    @property
    def benign_groups(self) -> int:
        return sum(g.benign for g in self.groups)


def training_behaviors(
    behaviors: Mapping[str, Behavior] | Sequence[Behavior], behavior_ids: Sequence[str] | None = None
) -> list[Behavior]:
    """Training-split behaviors; explicitly requesting a held-out or unknown id raises."""
    pool = list(behaviors.values()) if isinstance(behaviors, Mapping) else list(behaviors)
    by_id = {b.id: b for b in pool}
    if behavior_ids is None:
        return sorted((b for b in pool if b.split == "train"), key=lambda b: b.id)
    unknown = [i for i in behavior_ids if i not in by_id]
    if unknown:
        raise ValueError(f"unknown behavior id(s) {unknown}; known: {sorted(by_id)}")
    held = [i for i in behavior_ids if by_id[i].split != "train"]
    if held:
        raise HeldOutBehaviorError(f"held-out behavior(s) {held} may not be used in training batches")
    return [by_id[i] for i in dict.fromkeys(behavior_ids)]


def build_batch(
    behaviors: Mapping[str, Behavior] | Sequence[Behavior],
    seeds: Sequence[Seed],
    families: Sequence[str],
    *,
    n_groups: int,
    k: int,
    benign_fraction: float = 0.5,
    behavior_ids: Sequence[str] | None = None,
    seed: int = 0,
    step: int = 0,
    implants: Mapping[str, str] | None = None,
) -> Batch:
    """Sample `n_groups` groups: round(n_groups * benign_fraction) benign, the rest planted.

    Behaviors are drawn uniformly (without replacement while possible), then one of their seeds;
    families are spread round-robin over a shuffled order so a batch covers several families.
    `implants` maps a family to the behavior its target's weights carry: a planted group on it is of
    that behavior (a training-split one with seeds, whether or not `behavior_ids` names it).
    """
    if n_groups < 1 or k < 1:
        raise ValueError(f"n_groups and k must be >= 1, got n_groups={n_groups}, k={k}")
    if not 0.0 <= benign_fraction <= 1.0:
        raise ValueError(f"benign_fraction must be within [0, 1], got {benign_fraction}")
    if not families:
        raise ValueError("families must name at least one target family")
    pool = training_behaviors(behaviors, behavior_ids)
    by_behavior: dict[str, list[Seed]] = {}
    for s in seeds:
        if s.behavior is not None:
            by_behavior.setdefault(s.behavior, []).append(s)
    usable = [b for b in pool if by_behavior.get(b.id)]
    if not usable:
        raise ValueError(f"no training behavior has seeds; behaviors: {[b.id for b in pool]}")
    implants = dict(implants or {})
    carried = {b.id: b for b in training_behaviors(behaviors, list(dict.fromkeys(implants.values())))}
    for family, behavior_id in implants.items():
        if not by_behavior.get(behavior_id):
            raise ValueError(f"no seed of behavior {behavior_id!r}, which the weights of target family {family} carry")
    rng = np.random.default_rng([seed, step])
    picks: list[int] = []
    while len(picks) < n_groups:
        picks.extend(rng.permutation(len(usable)).tolist())
    n_benign = int(round(n_groups * benign_fraction))
    benign_flags = np.zeros(n_groups, dtype=bool)
    benign_flags[rng.permutation(n_groups)[:n_benign]] = True
    family_order = rng.permutation(n_groups)
    groups: list[GroupSpec] = []
    for i in range(n_groups):
        family = families[int(family_order[i]) % len(families)]
        behavior = usable[picks[i]]
        if family in implants and not benign_flags[i]:
            behavior = carried[implants[family]]
        candidates = sorted(by_behavior[behavior.id], key=lambda s: s.id)
        chosen = candidates[int(rng.integers(len(candidates)))]
        groups.append(
            GroupSpec(
                seed=chosen,
                behavior=None if benign_flags[i] else behavior,
                seed_behavior_id=behavior.id,
                family=family,
                k=k,
            )
        )
    return Batch(step=step, groups=groups)
