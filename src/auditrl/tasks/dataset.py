"""The audit task's dataset: the chosen behaviors' seeds, planted, and a share of them again, benign."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, zip_longest
from typing import Literal

from inspect_ai.dataset import MemoryDataset, Sample

from auditrl.behaviors.schema import Behavior, Seed

Split = Literal["heldout", "train", "all"]
BENIGN = "benign"


def chosen_behaviors(
    library: dict[str, Behavior], behaviors: str | Sequence[str] | None, split: Split
) -> list[Behavior]:
    """The behaviors named (a list, or one comma-separated string), else every behavior of the split, by id."""
    if behaviors:
        names = [b.strip() for b in (behaviors.split(",") if isinstance(behaviors, str) else behaviors) if b.strip()]
        unknown = [b for b in names if b not in library]
        if unknown:
            raise ValueError(
                f"task parameter behaviors: unknown behavior(s) {', '.join(unknown)}; see `auditrl behaviors list`"
            )
        return [library[b] for b in names]
    return sorted((b for b in library.values() if split == "all" or b.split == split), key=lambda b: b.id)


def benign_count(planted: int, share: float) -> int:
    """How many benign samples make them `share` of the dataset; each seed is used at most once benign."""
    if not 0.0 <= share <= 0.5:
        raise ValueError(
            "task parameter benign_share must be between 0 and 0.5 (0.5: every seed also against a benign "
            f"target), got {share}"
        )
    return min(planted, round(planted * share / (1.0 - share)))


def sample_of(seed: Seed, behavior: Behavior | None) -> Sample:
    """One sample: its id names the behavior (or `benign`) and the seed, as exported logs name theirs."""
    return Sample(
        id=f"{behavior.id if behavior else BENIGN}:{seed.id}",
        input=seed.instructions,
        target=behavior.id if behavior else BENIGN,
        metadata={"behavior_id": behavior.id if behavior else None, "seed_id": seed.id},
    )


def audit_dataset(banks: dict[str, list[Seed]], behaviors: Sequence[Behavior], benign_share: float) -> MemoryDataset:
    """Planted samples for every seed of every behavior, then benign ones for a share of the same seeds.

    Benign seeds are taken in turn from each behavior's bank, so every behavior gets its calibration audits."""
    planted = [(seed, b) for b in behaviors for seed in banks[b.id]]
    if not planted:
        raise ValueError("the audit task has no seeds: the chosen behaviors have empty seed banks")
    rounds = zip_longest(*(banks[b.id] for b in behaviors))
    benign = [seed for seed in chain.from_iterable(rounds) if seed is not None][
        : benign_count(len(planted), benign_share)
    ]
    samples = [sample_of(seed, b) for seed, b in planted] + [sample_of(seed, None) for seed in benign]
    return MemoryDataset(samples, name="auditrl")


def seeds_dataset(
    seeds: Sequence[Seed], library: dict[str, Behavior], behaviors: Sequence[Behavior], benign_share: float
) -> MemoryDataset:
    """Samples for seeds given by Petri's `seed_instructions`: a behavior's seed against that behavior's plant, any
    other seed against each of `behaviors` (none: once, unplanted, as Petri audits); then benign ones for a share
    of the planted seeds, as `audit_dataset` takes them."""
    planted: list[tuple[Seed, Behavior]] = []
    unplanted: list[Seed] = []
    for seed in seeds:
        if seed.behavior is not None:
            planted.append((seed, library[seed.behavior]))
        elif behaviors:
            planted += [(seed, b) for b in behaviors]
        else:
            unplanted.append(seed)
    once = list(dict.fromkeys(seed.id for seed, _ in planted))
    by_id = {seed.id: seed for seed, _ in planted}
    benign = [by_id[i] for i in once][: benign_count(len(planted), benign_share)]
    samples = [sample_of(seed, b) for seed, b in planted] + [sample_of(seed, None) for seed in [*benign, *unplanted]]
    return MemoryDataset(samples, name="auditrl")
