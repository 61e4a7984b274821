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


def test_an_implant_family_plants_its_own_behavior_and_leaves_benign_groups_and_other_families_as_drawn() -> None:
    implants = {"gpt": "train_5"}
    plain = build_batch(TRAIN, SEEDS, FAMILIES, n_groups=20, k=2, seed=4, behavior_ids=["train_0", "train_1"])
    batch = build_batch(
        TRAIN, SEEDS, FAMILIES, n_groups=20, k=2, seed=4, behavior_ids=["train_0", "train_1"], implants=implants
    )
    on_implant = [g for g in batch.groups if g.family == "gpt"]
    assert any(g.benign for g in on_implant) and any(not g.benign for g in on_implant)
    for before, after in zip(plain.groups, batch.groups, strict=True):
        assert after.family == before.family and after.benign == before.benign
        if after.family == "gpt" and not after.benign:
            assert after.behavior_id == after.seed_behavior_id == after.seed.behavior == "train_5"
        else:
            assert after == before
    with pytest.raises(HeldOutBehaviorError, match="secret_loyalty"):
        build_batch(TRAIN + HELD, SEEDS, FAMILIES, n_groups=4, k=2, implants={"gpt": "secret_loyalty"})
    with pytest.raises(ValueError, match="no seed of behavior 'train_5', which the weights of target family gpt"):
        build_batch(TRAIN, SEEDS[:5], FAMILIES, n_groups=4, k=2, implants=implants)
