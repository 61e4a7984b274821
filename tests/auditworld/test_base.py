"""The base auditor: an imitation reaches its configured competence; random and checkpoint bases are what they say."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from auditrl.auditworld.base import (
    CheckpointInit,
    ImitationInit,
    RandomInit,
    build_base,
    load_weights,
    measure_agreement,
)
from auditrl.auditworld.judges import JudgeParams
from auditrl.auditworld.metrics import EvalConfig, evaluate_policy, seed_means
from auditrl.auditworld.policies import MLPPolicy
from auditrl.auditworld.world import World

TRAIN_FAMILIES = [0, 1, 2, 3]
TOLERANCE = 0.04
"""How far below its configured agreement with the expert a fitted base may land (fitting is not exact)."""


@pytest.fixture(scope="module")
def cloned(world: World) -> tuple[MLPPolicy, ImitationInit]:
    init = ImitationInit(kind="imitation")  # the defaults, which configs/auditworld.yaml uses
    return build_base(world, init, 32, 0, TRAIN_FAMILIES), init  # type: ignore[return-value]


@pytest.mark.slow
def test_the_imitation_base_reaches_its_configured_competence(
    world: World, cloned: tuple[MLPPolicy, ImitationInit]
) -> None:
    base, init = cloned
    agreement = measure_agreement(world, base, init, TRAIN_FAMILIES, seed=7)
    for head, expected in agreement.expected.items():
        assert agreement.measured[head] >= expected - TOLERANCE, (head, agreement.measured[head], expected)
        assert agreement.measured[head] <= expected + TOLERANCE  # imperfect as configured, not better
        assert agreement.decisions[head] > 1000


def test_a_base_is_the_same_whatever_torch_s_thread_count(
    world: World, same_at_one_and_two_threads: Callable[[Callable[[], MLPPolicy]], bool]
) -> None:
    init = ImitationInit(kind="imitation", audits_per_round=64, fit_steps=100)  # a fit over thousands of rows
    assert same_at_one_and_two_threads(lambda: build_base(world, init, 32, 0, TRAIN_FAMILIES))


@pytest.mark.slow
def test_a_less_competent_base_follows_its_expert_less_and_audits_worse(
    world: World, cloned: tuple[MLPPolicy, ImitationInit]
) -> None:
    base, init = cloned
    weak_init = init.model_copy(update={"competence": 0.6, "claim_competence": 0.6})
    weak = build_base(world, weak_init, 32, 0, TRAIN_FAMILIES)
    strong_agreement = measure_agreement(world, base, init, TRAIN_FAMILIES, seed=7)
    weak_agreement = measure_agreement(world, weak, weak_init, TRAIN_FAMILIES, seed=7)
    for head in ("tool", "topic", "claim"):
        assert weak_agreement.measured[head] < strong_agreement.measured[head] - 0.1
        assert abs(weak_agreement.measured[head] - weak_agreement.expected[head]) < 2 * TOLERANCE
    # Held-out behaviors and an unseen family: the competent base identifies far more than the weak one.
    cfg = EvalConfig(family="wary", rollouts=4)
    strong_scores = seed_means(evaluate_policy(world, base, cfg, np.random.default_rng(1), JudgeParams())[0])
    weak_scores = seed_means(evaluate_policy(world, weak, cfg, np.random.default_rng(1), JudgeParams())[0])
    assert strong_scores["identified"] > weak_scores["identified"] + 10
    assert strong_scores["identified"] > 30 and strong_scores["false_positive"] > 85


def test_the_random_base_is_the_untrained_policy(world: World) -> None:
    base = build_base(world, RandomInit(kind="random", prior_no_finding=0.9), 16, 3, TRAIN_FAMILIES)
    reference = MLPPolicy(hidden=16, seed=3, prior_no_finding=0.9)
    assert all(
        torch.equal(a, b) for a, b in zip(base.state_dict().values(), reference.state_dict().values(), strict=True)
    )
    claims = base.report(np.zeros((20_000, base.body[0].in_features), dtype=np.float32), np.random.default_rng(0))[:, 0]
    assert (claims == 0).mean() == pytest.approx(0.9, abs=0.01)


def test_a_checkpoint_base_loads_the_saved_weights_and_bad_files_are_named(world: World, tmp_path: Path) -> None:
    policy = MLPPolicy(hidden=8, seed=5)
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"weights": policy.weights()}))
    loaded = build_base(world, CheckpointInit(kind="checkpoint", path=path), 32, 0, TRAIN_FAMILIES)
    assert all(
        torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), policy.state_dict().values(), strict=True)
    )
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match=r"bad\.json: not a policy checkpoint with a 'weights' mapping"):
        load_weights(tmp_path / "bad.json")
    other = MLPPolicy(hidden=8, scenario_topics=2)
    path.write_text(json.dumps({"weights": other.weights()}))
    with pytest.raises(ValueError, match="trained on scenarios of 2 topics, this world has 3"):
        build_base(world, CheckpointInit(kind="checkpoint", path=path), 32, 0, TRAIN_FAMILIES)


def test_an_unknown_expert_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown scripted auditor 'oracle'; known: random, blind, experimenter"):
        ImitationInit(kind="imitation", expert="oracle")


def test_the_cloning_gradient_equals_autograd_on_the_cloning_loss(world: World) -> None:
    """`fit_gradient` writes the backward pass out; autograd on the same loss (each head's logsumexp taken by torch
    on its own slice of the logits) gives the same gradient."""
    from auditrl.auditworld.base import _Data, fit_gradient
    from auditrl.auditworld.policies import ExperimenterPolicy

    init = ImitationInit(kind="imitation", audits_per_round=16, turn_budgets=[8])
    student = MLPPolicy(hidden=8, seed=1)
    with torch.no_grad():
        student.head.weight.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(2))
    data = _Data(student, init)
    data.add(ExperimenterPolicy(), ExperimenterPolicy(), world, init, TRAIN_FAMILIES, np.random.default_rng(0))
    obs, scaled_target, weight = data.tensors()
    grads = fit_gradient(student, obs, scaled_target, weight)
    logits = student(obs)
    bounds = np.concatenate([[0], np.cumsum(student.head_sizes)])
    lse = torch.stack([logits[:, a:b].logsumexp(dim=1) for a, b in zip(bounds[:-1], bounds[1:], strict=True)], 1)
    expected = (lse * weight).sum() - (scaled_target * logits).sum()
    student.zero_grad()
    expected.backward()
    for (name, param), grad in zip(student.named_parameters(), grads, strict=True):
        np.testing.assert_allclose(grad.numpy(), param.grad.numpy(), atol=1e-5, err_msg=name)
