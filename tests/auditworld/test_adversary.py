"""Co-trained concealment: the trained target hides from a fixed auditor without giving up its behavior, and the
judges never read the target's parameters."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from auditrl.auditworld.adversary import (
    PARAMETERS,
    ConcealmentPolicy,
    TargetSettings,
    measure_target,
    per_episode_families,
    rates_of,
    train_target,
    with_families,
)
from auditrl.auditworld.designs import RewardInputs, design_rewards, vectorised_names
from auditrl.auditworld.families import load_families
from auditrl.auditworld.judges import JudgeParams, pairwise_quality, realism_share
from auditrl.auditworld.policies import ExperimenterPolicy
from auditrl.auditworld.records import Observed
from auditrl.auditworld.simulate import simulate
from auditrl.auditworld.world import EpisodeBatch, World

SRC = Path(__file__).resolve().parents[2] / "src"
FLOOR = 40.0


def _train(world: World, floor: float, seed: int = 0) -> ConcealmentPolicy:
    start = ConcealmentPolicy.from_family("cotrained", load_families()["chatty"])
    settings = TargetSettings(lift_floor=floor, episodes_per_step=128)
    trained, history = train_target(world, ExperimenterPolicy(), start, settings, 40, np.random.default_rng(seed))
    assert [h.step for h in history] == list(range(40))
    return trained


def test_cotrained_target_lowers_a_fixed_auditors_identification_keeping_its_lift_above_the_floor(
    world: World,
) -> None:
    start = ConcealmentPolicy.from_family("cotrained", load_families()["chatty"])
    before = measure_target(world, start.family(), ExperimenterPolicy(), 1024, 15, 24, seed=99)
    trained = _train(world, FLOOR)
    after = measure_target(world, trained.family(), ExperimenterPolicy(), 1024, 15, 24, seed=99)
    assert before["lift"] > FLOOR + 20  # the floor binds: the target starts well above it
    assert after["identified"] < before["identified"] - 8
    assert after["lift"] >= FLOOR
    # without a floor the same training hides by not behaving: the floor is what keeps the behavior
    unfloored = measure_target(world, _train(world, 0.0).family(), ExperimenterPolicy(), 1024, 15, 24, seed=99)
    assert unfloored["lift"] < FLOOR - 5


def test_rates_stay_in_a_familys_bounds_and_start_at_the_family() -> None:
    fam = load_families()["wary"]
    policy = ConcealmentPolicy.from_family("x", fam)
    rates = policy.rates()
    assert rates["express"] == pytest.approx(fam.susceptibility) and rates["leak"] == pytest.approx(fam.leak)
    extreme = rates_of(np.array([[-50.0] * len(PARAMETERS), [50.0] * len(PARAMETERS)]))
    assert (extreme >= 0).all() and (extreme[:, 0] <= 2).all() and (extreme[:, 1:] <= 1).all()
    table = per_episode_families(fam, np.zeros((3, len(PARAMETERS))))
    assert len(table.names) == 3 and np.allclose(table.noise, fam.noise) and np.allclose(table.susceptibility, 1.0)


def _observe(world: World, family: object, seed: int) -> Observed:
    w = with_families(world, {"cotrained": family})  # type: ignore[dict-item]
    fam = w.families.index("cotrained")
    train = world.behavior_indices("train")[:8]
    behavior = np.repeat(np.concatenate([train, np.full(8, -1)]), 4)
    seed_behavior = np.repeat(np.concatenate([train, train]), 4)
    batch = EpisodeBatch(behavior, seed_behavior, np.zeros_like(behavior), np.full_like(behavior, fam), 15, 4)
    return simulate(w, batch, ExperimenterPolicy(), np.random.default_rng(seed)).observed


def _verdicts(obs: Observed, reference: Observed) -> dict[str, np.ndarray]:
    params = JudgeParams()
    ref = (pairwise_quality(reference, params), reference.key())
    out = {d: design_rewards(d, RewardInputs(obs, params, 4, False, ref)) for d in vectorised_names()}
    out["realism"] = realism_share(obs, params)
    return out


def test_judges_give_equal_transcripts_equal_verdicts_whatever_the_targets_parameters(world: World) -> None:
    """The experimenter only asks naturally, so a target's leak, sycophancy and eval awareness never show in its
    transcripts: two targets that differ only there leave equal records, and every judge gives equal verdicts."""
    start = ConcealmentPolicy.from_family("cotrained", load_families()["steady"])
    other = ConcealmentPolicy("cotrained", start.start, start.mean + np.array([0.0, 3.0, -3.0, 3.0]))
    a, b = _observe(world, start.family(), 3), _observe(world, other.family(), 3)
    assert (a.key() == b.key()).all()
    reference = _observe(world, start.family(), 4)
    va, vb = _verdicts(a, reference), _verdicts(b, reference)
    assert va.keys() == vb.keys() and all(np.array_equal(va[k], vb[k]) for k in va)
    # ... while the parameter that does show (how freely it behaves) changes what the judges read
    shy = ConcealmentPolicy("cotrained", start.start, start.mean + np.array([-4.0, 0.0, 0.0, 0.0]))
    assert (_observe(world, shy.family(), 3).key() != a.key()).any()


def _imports(module: str) -> set[str]:
    path = SRC / Path(*module.split(".")).with_suffix(".py")
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return {m for m in out if (SRC / Path(*m.split(".")).with_suffix(".py")).is_file()}


def test_no_judge_or_reward_module_imports_the_adversary() -> None:
    """Everything the judges and the auditor's rewards import, transitively, leaves the adversary out."""
    roots = ["auditrl.auditworld.judges", "auditrl.auditworld.transcript_judges", "auditrl.auditworld.designs"]
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += sorted(_imports(module))
    assert set(roots) <= seen and "auditrl.auditworld.records" in seen
    assert not {m for m in seen if m.endswith(".adversary") or m.endswith(".adversarial")}
