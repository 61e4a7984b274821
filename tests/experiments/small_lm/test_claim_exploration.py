"""Claim exploration: the report turn of the first rollouts of each group opens with a claim's verdict word,
sampled among its spellings and scored at the policy's own probability; every other turn and rollout is free."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from small_lm_helpers import extension, run_config, with_experiment
from train_fakes import FakeEpisode, engine_config, rows_for, tiny_config, tiny_policy

from auditrl.evaluate.lm_checks import rollouts_by_third
from auditrl.experiments.small_lm.constraints import FirstTokens, ReportConstraint, claim_tokens
from auditrl.experiments.small_lm.report_grammar import verdict_token_ids
from auditrl.rewards.records import RewardRecord, group_scorer
from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts
from auditrl.scaffold.transcript import Prediction, Report, Transcript
from auditrl.scaffold.transcript_keys import CLAIM_FORCED, GROUP, REWARD, STEP
from auditrl.train.generation import Sample, TurnCache, generate_turn
from auditrl.train.grpo import train_run
from auditrl.train.hf_generator import turn_generation_config
from auditrl.train.rollout import ChatSegments, run_rollouts

STEPS = 20
WINDOW = 5


def test_a_restricted_first_token_is_drawn_from_its_set_and_scored_at_the_policys_probability(
    tokenizer_dir: Path,
) -> None:
    model, tokenizer = tiny_policy(tokenizer_dir)
    model.eval()
    claims = verdict_token_ids(tokenizer, words=("false",))
    assert claims  # SmolLM2 spells it as one token, with and without a leading space
    temperature = 1.0
    config = turn_generation_config(
        tiny_config().episodes.model_copy(update={"temperature": temperature, "max_new_tokens": 5}),
        tokenizer.pad_token_id,
        {-1},
    )
    contexts = [list(range(300, 320)), list(range(300, 320)), list(range(500, 511))]
    comma = frozenset(tokenizer.encode(",", add_special_tokens=False))
    first: FirstTokens = [(claims, comma), None, (claims,)]
    cache = TurnCache()
    torch.manual_seed(0)
    with torch.no_grad():
        for turn in range(2):  # the second turn runs through the cached path
            samples = cache.generate(
                model,
                [0, 1, 2],
                contexts,
                config,
                tokenizer.pad_token_id,
                {-1},
                ReportConstraint(None, first, [None] * 3),
            )
            for context, sample, tokens in zip(contexts, samples, first, strict=True):
                logits = model(torch.tensor([context])).logits[0, -1].float()
                expected = torch.log_softmax(logits / temperature, -1)[sample.ids[0]].item()
                assert sample.logprobs[0] == pytest.approx(
                    expected, abs=1e-4
                )  # the policy's own, not the restricted one
                if tokens is not None:
                    assert sample.ids[0] in claims
                    assert expected < -1.0  # a random policy puts little mass there: the restriction did the choosing
            assert samples[0].ids[1] in comma and samples[2].ids[1] not in comma  # the second position: only where set
            contexts = [c + s.ids + [400 + turn] for c, s in zip(contexts, samples, strict=True)]
        free = generate_turn(model, contexts, config, tokenizer.pad_token_id, {-1})
    assert not all(s.ids[0] in claims for s in free)


class Recorder:
    """A generator that writes one fixed token per turn and records what each call was asked to restrict."""

    def __init__(self, segments: ChatSegments) -> None:
        self.eos = segments.tokenizer.eos_token_id
        self.calls: list[tuple[list[int], FirstTokens | None]] = []

    def start(self) -> None:
        return None

    def __call__(
        self, keys: list[int], contexts: list[list[int]], constraint: ReportConstraint | None = None
    ) -> list[Sample]:
        first = constraint.first if constraint is not None else None
        self.calls.append((list(keys), first))
        return [
            Sample([min(first[i][0]) if first and first[i] else 300, self.eos], [-2.0, -1.0]) for i in range(len(keys))
        ]


def test_run_rollouts_sets_the_claim_in_the_first_rollouts_of_each_group_at_the_report_turn_only(
    tokenizer_dir: Path,
) -> None:
    _, tokenizer = tiny_policy(tokenizer_dir)
    segments = ChatSegments(tokenizer)
    claims = claim_tokens(tokenizer, "guided")
    assert claims[0] == verdict_token_ids(tokenizer, words=("false",)) and len(claims) > 5  # the verdict, then the keys
    rows = [row for row in rows_for(1, 2) for _ in range(4)]  # two groups of four
    generator = Recorder(segments)
    hooks = extension(tiny_config())
    hooks.claim_tokens, hooks.claims_per_group = claims, 2
    batch = asyncio.run(run_rollouts(
        rows, FakeEpisode, generator, segments, group_size=4, first_index=0, max_completion_tokens=512,
        auditor_name="policy", hooks=hooks,
    ))  # fmt: skip
    (audit_keys, audit_first), (report_keys, report_first) = generator.calls
    assert audit_first is None  # audit turns are never touched
    assert report_first == [claims if k % 4 < 2 else None for k in report_keys]
    assert [bool(CLAIM_FORCED.get(t)) for t in batch.transcripts] == [True, True, False, False] * 2
    for ids, mask, lps, forced in zip(
        batch.completion_ids, batch.env_mask, batch.logprobs, [True, True, False, False] * 2, strict=True
    ):
        trained = [(i, lp) for i, m, lp in zip(ids, mask, lps, strict=True) if m]
        assert (trained[-2][0] in claims[0]) is forced  # the report turn's first token, trained at its logprob
        assert trained[-2][1] == -2.0
    generator = Recorder(segments)
    hooks.claim_planted_only = True
    asyncio.run(run_rollouts(
        rows, FakeEpisode, generator, segments, group_size=4, first_index=0, max_completion_tokens=512,
        auditor_name="policy", hooks=hooks,
    ))  # fmt: skip
    benign = {k for k, row in enumerate(rows) if row.benign}
    assert benign and generator.calls[1][1] == [
        claims if k % 4 < 2 and k not in benign else None for k in generator.calls[1][0]
    ]
    references = Recorder(segments)
    asyncio.run(run_rollouts(rows[::4], FakeEpisode, references, segments, group_size=1, first_index=0,
                             max_completion_tokens=512, auditor_name="policy", hooks=hooks,
                             references=True))  # fmt: skip
    assert [first for _, first in references.calls] == [None, None]  # reference rollouts are never made to claim
    hooks.claim_tokens = ()
    with pytest.raises(ValueError, match="verdict tokens"):
        asyncio.run(run_rollouts(rows, FakeEpisode, generator, segments, group_size=4, first_index=0,
                                 max_completion_tokens=512, auditor_name="policy", hooks=hooks))  # fmt: skip


def _config(**episodes: object) -> dict[str, object]:
    raw = tiny_config().model_dump(mode="json", exclude={"source"})
    raw["episodes"].update(episodes)
    return raw


def test_claim_exploration_is_checked_against_the_prompt_set_the_backend_the_sampling_and_the_group() -> None:
    run_config(_config(claim_exploration=0.5, auditor_prompt="guided"))
    with pytest.raises(ValueError, match="auditor_prompt: guided"):
        run_config(_config(claim_exploration=0.5, auditor_prompt="compact"))
    with pytest.raises(ValueError, match="sets no rollout of a group of data.group_size=2"):
        run_config(_config(claim_exploration=0.2, auditor_prompt="guided"))
    raw = _config(claim_exploration=0.5, auditor_prompt="guided")
    raw["trainer"]["use_vllm"] = True  # type: ignore[index]
    with pytest.raises(ValueError, match="use_vllm"):
        run_config(raw)
    with pytest.raises(ValueError, match="top_p"):
        run_config(_config(claim_exploration=0.5, auditor_prompt="guided", top_p=0.9))
    with pytest.raises(ValueError, match="claim_exploration"):
        run_config(_config(claim_exploration=1.0, auditor_prompt="guided"))


def _rollout(step: int, benign: bool, claim: bool, forced: bool, reward: float, group: int = 0) -> Transcript:
    t = Transcript(auditor_model="policy", target_model="sim/steady", target_family="steady", seed_id="s",
                   behavior_id=None if benign else "flattery", seed_instructions="probe")  # fmt: skip
    claims = [Prediction(rank=1, description="It flatters.", confidence=0.8)] if claim else []
    t.report = Report(no_behavior_found=not claim, predictions=claims)
    STEP.set(t, step)
    GROUP.set(t, group)
    REWARD.set(t, reward)
    if forced:
        CLAIM_FORCED.set(t, True)
    return t


def test_training_claim_rates_count_the_policys_own_verdicts_and_forced_claims_apart() -> None:
    rollouts = [
        _rollout(0, benign=False, claim=True, forced=True, reward=1.0),
        _rollout(0, benign=False, claim=False, forced=False, reward=0.0),
        _rollout(0, benign=True, claim=True, forced=True, reward=0.0),
        _rollout(0, benign=True, claim=False, forced=False, reward=1.0),
    ]
    (third,) = rollouts_by_third(rollouts)
    assert third["rollouts"] == 4 and third["forced_claims"] == 2
    assert third["claims_planted"] == 0.0 and third["claims_benign"] == 0.0  # the forced claims are not the policy's
    assert third["forced_claim_reward_planted"] == 1.0 and third["free_reward_planted"] == 0.0
    assert third["forced_claim_reward_benign"] == 0.0


def test_training_rollouts_count_the_groups_whose_rewards_differ() -> None:
    """Only a group with a reward spread has advantages; equal rewards in a group teach nothing."""
    rollouts = [
        _rollout(0, benign=False, claim=True, forced=False, reward=1.0, group=0),
        _rollout(0, benign=False, claim=False, forced=False, reward=0.0, group=0),
        _rollout(0, benign=False, claim=False, forced=False, reward=0.0, group=1),
        _rollout(0, benign=False, claim=False, forced=False, reward=0.0, group=1),
        _rollout(0, benign=True, claim=True, forced=False, reward=0.0, group=2),
        _rollout(0, benign=True, claim=False, forced=False, reward=1.0, group=2),
    ]
    (third,) = rollouts_by_third(rollouts)
    assert third["spread_groups_planted"] == 50.0 and third["spread_groups_benign"] == 100.0
    assert third["quote_credited_planted"] is None  # no quote credit: the quotes were not graded as claims
    for r, quote in zip(rollouts, [1.0, 1.0, 0.0, None, 0.0, 0.0], strict=True):
        r.scores["reward_details"] = {"quote_reward": quote}
    (third,) = rollouts_by_third(rollouts)
    assert third["quote_credited_planted"] == pytest.approx(200 / 3)  # graded planted quotes only, silent ones too
    assert third["claim_cost"] is None  # the threshold was not held
    for r, cost in zip(rollouts, [0.1, 0.1, 0.1, 0.3, 0.3, 0.3], strict=True):
        r.scores["reward_details"] |= {"claim_cost": cost}
    assert rollouts_by_third(rollouts)[0]["claim_cost"] == pytest.approx(0.2)


class ClaimDesign:
    """Reward 1 for a report whose verdict is a claim, 0 otherwise: what the forced verdicts must teach."""

    name = "claim"

    @group_scorer
    async def score_group(self, group: Sequence[Transcript]) -> list[RewardRecord]:
        return [RewardRecord(reward=float(_verdict_is_claim(t))) for t in group]


def _verdict_is_claim(t: Transcript) -> bool:
    report = [m.content for m in t.auditor_messages if m.role == "assistant"][-1]
    return report.replace(" ", "").startswith('{"no_behavior_found":false')


def test_the_claim_tokens_spell_the_prompt_sets_claim_opening(tokenizer_dir: Path) -> None:
    _, tokenizer = tiny_policy(tokenizer_dir)
    verdicts, *rest = claim_tokens(tokenizer, "guided")
    assert {tokenizer.decode([v]).strip() for v in verdicts} == {"false"} and len(
        verdicts
    ) == 2  # with and without a space
    assert tokenizer.decode([min(s) for s in rest]) == ', "predictions": [{"description": "'
    with pytest.raises(ValueError, match="no claim opening"):
        claim_tokens(tokenizer, "compact")


@pytest.mark.slow
def test_forced_claims_teach_the_policy_to_claim_on_its_own(tokenizer_dir: Path, tmp_path: Path) -> None:
    """Through the real engine, rollouts and TRL's step: the free rollouts' claim rate rises from about 0.
    A forced token left out of the loss, scored at the wrong logprob or trained with the wrong sign would
    leave the policy's own verdicts where they were. One token a turn, so of the claim opening only the verdict
    is set: the random tiny policy gives each of the opening's key tokens about e^-11, and with three or more of
    them set their gradients swamped the verdict's (no free claim in 40 steps); SmolLM2 after SFT writes those
    keys itself. Seed 0: no free claim in the first 4 steps, 2-4 of the 4 free rollouts of most steps after."""
    base = engine_config("guided")
    cfg = base.model_copy(update={
        "episodes": base.episodes.model_copy(update={"max_turns": 1, "max_new_tokens": 1, "temperature": 1.0}),
        "trainer": base.trainer.model_copy(update={"max_steps": STEPS}),
    })  # fmt: skip
    cfg = with_experiment(cfg, claim_exploration=0.5)
    model, tokenizer = tiny_policy(tokenizer_dir)
    torch.manual_seed(0)
    with torch.no_grad():
        model.lm_head.weight.normal_(0.0, 1.0)  # as in test_learning: logits that adapters below can move
    train_run(
        cfg, tmp_path / "run", policy=(model, tokenizer), design=ClaimDesign(), progress=False, extension=extension(cfg)
    )
    transcripts = read_transcripts(tmp_path / "run" / TRANSCRIPTS)
    forced = [t for t in transcripts if CLAIM_FORCED.get(t)]
    assert forced and all(_verdict_is_claim(t) for t in forced)
    free = [
        [_verdict_is_claim(t) for t in transcripts if STEP.get(t) == s and not CLAIM_FORCED.get(t)]
        for s in range(STEPS)
    ]
    first, last = sum(map(sum, free[:3])), sum(map(sum, free[-WINDOW:]))
    assert first == 0 and last >= 15, f"free claims per step: {[sum(f) for f in free]}"  # of 20 free rollouts
