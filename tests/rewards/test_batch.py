import pytest
from reward_factories import behavior, seeds_for

from auditrl.rewards.batch import HeldOutBehaviorError, build_batch

TRAIN = [behavior(f"train_{i}") for i in range(6)]
HELD = [behavior("secret_loyalty", "heldout"), behavior("animal_welfare", "heldout")]
SEEDS = [s for b in TRAIN + HELD for s in seeds_for(b.id)]
FAMILIES = ["llama", "gemini", "grok", "gpt", "seed"]


def test_heldout_never_in_training_batches() -> None:
    library = {b.id: b for b in TRAIN + HELD}
    for step in range(30):
        batch = build_batch(library, SEEDS, FAMILIES, n_groups=8, k=4, seed=1, step=step)
        used = {g.seed_behavior_id for g in batch.groups} | {g.behavior_id for g in batch.groups if g.behavior_id}
        assert used.isdisjoint({"secret_loyalty", "animal_welfare"})
    with pytest.raises(HeldOutBehaviorError, match="secret_loyalty"):
        build_batch(library, SEEDS, FAMILIES, n_groups=4, k=2, behavior_ids=["train_0", "secret_loyalty"])
    with pytest.raises(ValueError, match="unknown behavior"):
        build_batch(library, SEEDS, FAMILIES, n_groups=4, k=2, behavior_ids=["nope"])


@pytest.mark.parametrize(("fraction", "n_benign"), [(0.0, 0), (0.125, 1), (0.25, 2), (0.5, 4), (1.0, 8)])
def test_calibration_proportions(fraction: float, n_benign: int) -> None:
    batch = build_batch(TRAIN, SEEDS, FAMILIES, n_groups=8, k=4, benign_fraction=fraction, seed=3)
    assert batch.benign_groups == n_benign
    for g in batch.groups:
        assert g.k == 4 and g.seed.behavior == g.seed_behavior_id
        assert (g.behavior is None) == g.benign and (g.benign or g.behavior_id == g.seed_behavior_id)


def test_families_spread_and_determinism() -> None:
    a = build_batch(TRAIN, SEEDS, FAMILIES, n_groups=10, k=2, seed=7, step=5)
    b = build_batch(TRAIN, SEEDS, FAMILIES, n_groups=10, k=2, seed=7, step=5)
    c = build_batch(TRAIN, SEEDS, FAMILIES, n_groups=10, k=2, seed=7, step=6)
    assert a == b and a != c
    assert {g.family for g in a.groups} == set(FAMILIES)
    assert len({g.seed_behavior_id for g in a.groups}) == len(TRAIN)  # without replacement while possible
