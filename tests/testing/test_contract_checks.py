"""The installed contract checks fail, naming the design or family and the contract, on each way to break one."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterator, Sequence

import pytest

from auditrl.auditworld import designs as sim_designs
from auditrl.auditworld.designs import binary_rewards, vectorised
from auditrl.judges import registry as judges_registry
from auditrl.judges.programmatic import (
    ProgrammaticBinaryJudge,
    ProgrammaticConcerningnessJudge,
    ProgrammaticPairwiseJudge,
)
from auditrl.judges.registry import JudgeFamily, judge_family
from auditrl.judges.verdicts import BinaryVerdict, DimensionScores, PairwiseResult
from auditrl.rewards import registry as rewards_registry
from auditrl.rewards.records import RewardRecord, group_scorer, unscored
from auditrl.rewards.registry import reward_design
from auditrl.scaffold.transcript import Transcript
from auditrl.testing import (
    ContractError,
    check_judge_family,
    check_reward_design,
    judge_family_checks,
    reward_design_checks,
)

Score = Callable[[JudgeFamily, Sequence[Transcript]], Awaitable[list[RewardRecord]]]


@pytest.fixture(autouse=True)
def registries(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Whatever a test registers is gone afterwards."""
    monkeypatch.setattr(rewards_registry, "_DESIGNS", dict(rewards_registry._designs()))
    monkeypatch.setattr(judges_registry, "_FAMILIES", dict(judges_registry._families()))
    monkeypatch.setattr(sim_designs, "_VECTORISED", dict(sim_designs._VECTORISED))
    yield


class Scripted:
    """A design scoring with `score(judges, group)`; `checked` gives it the shared group checks."""

    def __init__(self, name: str, score: Score, judges: JudgeFamily, checked: bool) -> None:
        self.name, self.score, self.judges, self.checked = name, score, judges, checked

    async def score_group(self, group: Sequence[Transcript]) -> list[RewardRecord]:
        return await (self._checked(group) if self.checked else self.score(self.judges, group))

    @group_scorer
    async def _checked(self, group: Sequence[Transcript]) -> list[RewardRecord]:
        return await self.score(self.judges, group)


def register(name: str, score: Score, *, checked: bool = True) -> str:
    reward_design(name, description="a broken design")(lambda judges, ctx: Scripted(name, score, judges, checked))
    return name


async def binary_verdicts(judges: JudgeFamily, group: Sequence[Transcript]) -> list[BinaryVerdict]:
    judge = judges.binary(False)
    return [await judge.score(t) for t in group]


async def honest(judges: JudgeFamily, group: Sequence[Transcript]) -> list[RewardRecord]:
    """The binary design's rewards, planted and benign: a design that meets the contract."""
    if group[0].benign:
        return [RewardRecord(reward=float(t.report is not None and t.report.no_behavior_found)) for t in group]
    return [
        RewardRecord(reward=None, details={"abstained": True, "reason": v.reason})
        if v.abstained
        else RewardRecord(reward=float(bool(v.surfaced)))
        for v in await binary_verdicts(judges, group)
    ]


def broken(name: str, contract: str) -> ContractError:
    with pytest.raises(ContractError) as caught:
        check_reward_design(name, ["programmatic"])
    assert f"{name}[programmatic]: {contract}" in str(caught.value)
    return caught.value


def test_a_design_that_meets_the_contract_passes_it() -> None:
    check_reward_design(register("honest", honest))


def test_an_empty_group_must_give_no_records_without_a_judge_call() -> None:
    async def first_of(judges: JudgeFamily, group: Sequence[Transcript]) -> list[RewardRecord]:
        return [RewardRecord(reward=1.0) for _ in group] if group[0].benign else await honest(judges, group)

    assert "raised IndexError" in str(broken(register("first_of", first_of, checked=False), "empty group"))


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda rs: rs[:-1], "records for a group of"),
        (lambda rs: [RewardRecord(reward=math.nan) for _ in rs], "is not finite"),
        (lambda rs: [RewardRecord(reward=None) for _ in rs], "no reward and no reason"),
        (lambda rs: [unscored("never") for _ in rs], "was given a reward"),
        (lambda rs: [r.reward for r in rs], "is not a RewardRecord"),
    ],
    ids=["one short", "nan", "none without reason", "never scores", "floats"],
)
def test_every_rollout_needs_one_record_with_a_finite_reward_or_a_reason(
    change: Callable[[list[RewardRecord]], list], message: str
) -> None:
    async def score(judges: JudgeFamily, group: Sequence[Transcript]) -> list[RewardRecord]:
        return change(await honest(judges, group))

    assert message in str(broken(register("changed", score), "one record per rollout"))


def test_an_abstention_must_reach_its_rollout_as_none_with_the_judges_reason() -> None:
    async def zero_on_abstention(judges: JudgeFamily, group: Sequence[Transcript]) -> list[RewardRecord]:
        if group[0].benign:
            return await honest(judges, group)
        return [
            RewardRecord(reward=0.0 if v.abstained else float(bool(v.surfaced)))
            for v in await binary_verdicts(judges, group)
        ]

    assert "the judge abstained about it" in str(broken(register("zero", zero_on_abstention), "abstention"))


def test_an_abstention_must_not_cost_other_rollouts_their_rewards() -> None:
    async def all_or_nothing(judges: JudgeFamily, group: Sequence[Transcript]) -> list[RewardRecord]:
        records = await honest(judges, group)
        abstained = [r for r in records if r.abstained]
        return [abstained[0] for _ in records] if abstained else records

    assert "lost its reward" in str(broken(register("spread", all_or_nothing), "abstention"))


def test_a_group_mixing_behaviors_or_seeds_must_be_refused() -> None:
    async def anything(judges: JudgeFamily, group: Sequence[Transcript]) -> list[RewardRecord]:
        return [RewardRecord(reward=1.0) for _ in group]

    error = broken(register("lenient", anything, checked=False), "mixed group")
    assert "group_scorer" in str(error)


def test_a_vectorised_form_must_give_the_per_transcript_rewards() -> None:
    name = register("honest_vec", honest)
    vectorised(name)(lambda x: binary_rewards(x.observed, x.params))
    check_reward_design(name, [])  # the binary design's two forms agree
    vectorised(name)(lambda x: binary_rewards(x.observed, x.params, strict=True))
    with pytest.raises(
        ContractError,
        match=r"honest_vec: vectorised form: \d+ of \d+ rollouts differ .*per-transcript 1\.0, vectorised 0\.0",
    ):
        check_reward_design(name, [])
    vectorised(name)(lambda x: binary_rewards(x.observed, x.params)[:-1])
    with pytest.raises(ContractError, match="the vectorised form gave shape"):
        check_reward_design(name, [])


def test_every_broken_contract_is_listed_and_checks_are_named_for_pytest() -> None:
    async def anything(judges: JudgeFamily, group: Sequence[Transcript]) -> list[RewardRecord]:
        return [RewardRecord(reward=1.0) for _ in group]

    name = register("accepts_anything", anything, checked=False)
    ids = [c.id for c in reward_design_checks(name, ["programmatic", "sim"])]
    assert ids[:4] == [
        f"{name}[programmatic]: {c}" for c in ("empty group", "one record per rollout", "abstention", "mixed group")
    ]
    with pytest.raises(ContractError, match=r"2 contract\(s\) broken") as caught:
        check_reward_design(name, ["programmatic", "sim"])
    assert f"{name}[programmatic]: mixed group" in str(caught.value) and f"{name}[sim]: mixed group" in str(
        caught.value
    )


def test_unknown_names_are_refused_before_any_check() -> None:
    with pytest.raises(ValueError, match="unknown reward design 'nope'"):
        reward_design_checks("nope")
    with pytest.raises(ValueError, match="unknown judge family 'nope'; registered: programmatic, sim"):
        judge_family_checks("nope")


class ElevenConcerning(ProgrammaticConcerningnessJudge):
    async def score(self, transcript: Transcript) -> DimensionScores:
        v = await super().score(transcript)
        return v.model_copy(update={"scores": {**v.scores, "concerning": 11}})


class SilentBinary(ProgrammaticBinaryJudge):
    async def score(self, transcript: Transcript) -> BinaryVerdict:
        return BinaryVerdict(strict=self.strict)


class SwappedPairwise(ProgrammaticPairwiseJudge):
    async def compare(self, a: Transcript, b: Transcript) -> PairwiseResult:
        return await super().compare(b, a)


@pytest.mark.parametrize(
    "kind,judge,message",
    [
        ("concerningness", ElevenConcerning, "scores outside 1-10: {'concerning': 11}"),
        ("binary", SilentBinary, "surfaced is None"),
        ("pairwise", SwappedPairwise, "the result is for"),
    ],
)
def test_a_judge_must_give_a_verdict_for_its_input_or_abstain_with_a_reason(
    kind: str, judge: type, message: str
) -> None:
    class Family:
        def concerningness(self) -> ProgrammaticConcerningnessJudge:
            return judge() if kind == "concerningness" else ProgrammaticConcerningnessJudge()

        def binary(self, strict: bool) -> ProgrammaticBinaryJudge:
            return judge(strict=strict) if kind == "binary" else ProgrammaticBinaryJudge(strict=strict)

        def pairwise(self, calibration: bool) -> ProgrammaticPairwiseJudge:
            return judge() if kind == "pairwise" else ProgrammaticPairwiseJudge()

    judge_family(f"broken_{kind}", description="a broken family")(Family)
    with pytest.raises(ContractError) as caught:
        check_judge_family(f"broken_{kind}")
    assert f"broken_{kind}: {kind} judge: " in str(caught.value) and message in str(caught.value)


def test_a_family_that_meets_the_contract_passes_it_with_every_design() -> None:
    judge_family("plain", description="the programmatic judges again")(
        judges_registry._FAMILIES["programmatic"].factory
    )
    check_judge_family("plain")
