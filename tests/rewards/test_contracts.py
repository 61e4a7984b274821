"""Contract checks run over every registered reward design and judge family (in the manner of sklearn's
estimator checks): an empty group, abstentions (None with a reason), mixed groups, one value per input."""

from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np
import pytest

from auditrl.behaviors.library import load_behaviors
from auditrl.judges.client import JudgeClient
from auditrl.judges.concerningness import CONCERNINGNESS_DIMENSIONS
from auditrl.judges.programmatic import ProgrammaticBinaryJudge, ProgrammaticConcerningnessJudge, ProgrammaticPairwiseJudge
from auditrl.judges.registry import JudgeFamily, ModelJudges, family_names, resolve_judges
from auditrl.judges.scripted import scripted_judge_model
from auditrl.judges.verdicts import BinaryVerdict, DimensionScores, PairwiseResult, PairwiseVerdict
from auditrl.rewards.records import RewardRecord
from auditrl.rewards.reference import ReferenceStore
from auditrl.rewards.registry import build_design, design_names
from auditrl.scaffold.transcript import Transcript
from auditrl.sim.policies import ExperimenterPolicy, InterrogatorPolicy
from auditrl.sim.render import render_episodes
from auditrl.sim.simulate import simulate
from auditrl.sim.world import World, evaluation_batch

K = 3
ABSTAIN = "judge could not answer"


def _groups(world: World, benign: bool, seed: int) -> list[list[Transcript]]:
    """Rendered AuditWorld audits, K per (behavior, seed): every family can read them."""
    batch = evaluation_batch(world, world.behavior_indices("heldout")[:1], 0, K, 10, benign)
    rng = np.random.default_rng(seed)
    transcripts: list[Transcript] = []
    for policy in (ExperimenterPolicy(), InterrogatorPolicy()):
        rollout = simulate(world, batch, policy, rng)
        transcripts += render_episodes(world, rollout, range(rollout.batch.size), policy.name)
    by_key: dict[tuple[str | None, str], list[Transcript]] = {}
    for t in transcripts:
        by_key.setdefault((t.behavior_id, t.seed_id), []).append(t)
    return [g[:K] for g in by_key.values()][:2]


@pytest.fixture(scope="module")
def groups() -> dict[str, list[list[Transcript]]]:
    world = World.build(load_behaviors(), seeds_per_behavior=2)
    out = {"planted": _groups(world, False, 0), "benign": _groups(world, True, 1)}
    assert all(len(gs) == 2 and all(len(g) == K for g in gs) for gs in out.values())
    return out


class AbstainingConcerningness:
    def __init__(self, ids: set[str]) -> None:
        self.ids = ids

    async def score(self, t: Transcript) -> DimensionScores:
        if t.id in self.ids:
            return DimensionScores(abstained=True, reason=ABSTAIN)
        return await ProgrammaticConcerningnessJudge().score(t)


class AbstainingFamily:
    """A judge family that abstains, with a reason, on the given transcripts and answers programmatically otherwise."""

    def __init__(self, ids: Collection[str]) -> None:
        self.ids = set(ids)

    def concerningness(self) -> AbstainingConcerningness:
        return AbstainingConcerningness(self.ids)

    def binary(self, strict: bool) -> AbstainingBinary:
        return AbstainingBinary(self.ids, strict)

    def pairwise(self, calibration: bool) -> AbstainingPairwise:
        return AbstainingPairwise(self.ids)


class AbstainingBinary:
    def __init__(self, ids: set[str], strict: bool) -> None:
        self.ids, self.strict = ids, strict

    async def score(self, t: Transcript) -> BinaryVerdict:
        if t.id in self.ids:
            return BinaryVerdict(abstained=True, reason=ABSTAIN, strict=self.strict)
        return await ProgrammaticBinaryJudge(strict=self.strict).score(t)


class AbstainingPairwise:
    def __init__(self, ids: set[str]) -> None:
        self.ids = ids

    async def compare(self, a: Transcript, b: Transcript) -> PairwiseResult:
        if {a.id, b.id} & self.ids:
            v = PairwiseVerdict(abstained=True, reason=ABSTAIN)
            return PairwiseResult(a_id=a.id, b_id=b.id, first=v, second=v, share_a=None, consistent=None)
        return await ProgrammaticPairwiseJudge().compare(a, b)


def _check_records(records: list[RewardRecord], group: list[Transcript]) -> None:
    assert len(records) == len(group)
    for r in records:
        if r.reward is None:
            assert r.not_scored or (r.abstained and r.details.get("reason")), r.details
        else:
            assert math.isfinite(r.reward)


@pytest.mark.parametrize("design", design_names())
@pytest.mark.parametrize("family", family_names())
@pytest.mark.parametrize("part", ["planted", "benign"])
async def test_every_design_and_family_give_one_record_per_rollout(
    design: str, family: str, part: str, groups: dict[str, list[list[Transcript]]]
) -> None:
    built = build_design(design, family)
    assert await built.score_group_detailed([]) == []
    for group in groups[part]:
        _check_records(await built.score_group_detailed(group), group)


@pytest.mark.parametrize("design", design_names())
async def test_an_abstention_is_none_with_a_reason_beside_scored_rollouts(
    design: str, groups: dict[str, list[list[Transcript]]]
) -> None:
    group = groups["planted"][0]
    abstains = group[-1].id
    references = ReferenceStore()
    references.replace(0, [group[0].model_copy(update={"id": "reference"})])  # an earlier snapshot's rollout
    records = await build_design(design, AbstainingFamily([abstains]), references=references).score_group_detailed(group)
    _check_records(records, group)
    record = records[-1]
    assert record.reward is None and record.abstained and record.details["reason"] == ABSTAIN
    assert all(r.reward is not None for r in records[:-1])


@pytest.mark.parametrize("design", design_names())
async def test_a_group_mixing_behaviors_or_seeds_is_refused(design: str, groups: dict[str, list[list[Transcript]]]) -> None:
    mixed = [groups["planted"][0][0], groups["planted"][1][0]]
    with pytest.raises(ValueError, match=r"share one \(behavior, seed\)"):
        await build_design(design, "programmatic").score_group_detailed(mixed)


def _garbage_model_judges() -> JudgeFamily:
    return ModelJudges(JudgeClient(scripted_judge_model(lambda call: "no verdict here"), max_retries=0))


@pytest.mark.parametrize("family", [*family_names(), "model"])
async def test_every_judge_gives_a_verdict_or_an_abstention_with_a_reason(
    family: str, groups: dict[str, list[list[Transcript]]]
) -> None:
    judges = _garbage_model_judges() if family == "model" else resolve_judges(family)
    a, b = groups["planted"][0][:2]
    scores = await judges.concerningness().score(a)
    assert (scores.abstained and scores.reason) or set(scores.scores) == set(CONCERNINGNESS_DIMENSIONS)
    assert all(1 <= v <= 10 for v in scores.scores.values())
    for strict in (False, True):
        verdict = await judges.binary(strict).score(a)
        assert (verdict.abstained and verdict.reason) or isinstance(verdict.surfaced, bool)
    for calibration, (x, y) in ((False, (a, b)), (True, tuple(groups["benign"][0][:2]))):
        result = await judges.pairwise(calibration).compare(x, y)
        assert (result.a_id, result.b_id) == (x.id, y.id)
        if result.share_a is None:
            assert result.first.reason and result.second.reason
        else:
            assert 0.0 <= result.share_a <= 1.0
