"""The trainer's reward function: an audit that never reached the target can be given a fixed reward, and a benign
target's reward can be scaled against a finding's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from transformers import TrainerState

from auditrl.configfile import load_yaml
from auditrl.rewards.records import RewardRecord, group_scorer
from auditrl.scaffold.transcript import TargetMessage, Transcript
from auditrl.train.config import GRPOLMConfig
from auditrl.train.reward import GroupReward
from auditrl.train.runtime import AsyncRunner

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


class SilenceFavouringDesign:
    """Pays an audit more when the target said nothing: the loophole `no_contact_reward` closes."""

    name = "silence"

    @group_scorer
    async def score_group(self, group: Sequence[Transcript]) -> list[RewardRecord]:
        return [RewardRecord(reward=0.4 if t.target_messages else 0.9) for t in group]


def audit(contact: bool, behavior_id: str | None = None) -> Transcript:
    t = Transcript(
        auditor_model="policy",
        target_model="sim/steady",
        seed_id="s",
        seed_instructions="probe",
        behavior_id=behavior_id,
    )
    if contact:
        t.target_messages = [
            TargetMessage(id="u1", parent=None, role="user", content="Hi!"),
            TargetMessage(id="a1", parent="u1", role="assistant", content="Hello."),
        ]
    return t


def rewards(no_contact_reward: float | None, benign_scale: float = 1.0) -> tuple[list[float | None], list[Transcript]]:
    transcripts = [audit(True, "flattery"), audit(False, "flattery"), audit(True), audit(False)]
    runner = AsyncRunner()
    reward = GroupReward(
        SilenceFavouringDesign(), 2, runner, None, None, no_contact_reward=no_contact_reward, benign_scale=benign_scale
    )
    values = reward(
        prompts=["row-a", "row-a", "row-b", "row-b"],
        completions=[None] * 4,
        transcript=transcripts,
        group_index=[0, 0, 1, 1],
        rollout_index=[0, 1, 2, 3],
        trainer_state=TrainerState(global_step=3),
    )
    runner.close()
    return values, transcripts


def test_audits_without_contact_get_the_configured_reward_and_say_so() -> None:
    values, transcripts = rewards(0.0)
    assert values == [0.4, 0.0, 0.4, 0.0]
    assert [t.scores["reward_details"].get("no_contact", False) for t in transcripts] == [False, True, False, True]


def test_without_the_setting_the_design_scores_every_audit() -> None:
    values, _ = rewards(None)
    assert values == [0.4, 0.9, 0.4, 0.9]


def test_benign_scale_multiplies_only_benign_targets_rewards_and_says_so() -> None:
    values, transcripts = rewards(None, benign_scale=0.5)
    assert values == [0.4, 0.9, 0.2, 0.45]
    assert [t.scores["reward_details"].get("benign_scale") for t in transcripts] == [None, None, 0.5, 0.5]


def test_benign_scale_is_refused_where_group_wise_reward_scaling_would_undo_it() -> None:
    raw = load_yaml((CONFIGS / "experiments" / "small_lm" / "cpu_learn_evidence_sft.yaml").read_text())
    raw["reward"]["benign_scale"] = 0.5
    with pytest.raises(ValueError, match="benign_scale=0.5 is undone by trainer.scale_rewards=group"):
        GRPOLMConfig.model_validate(raw)
    raw["trainer"]["scale_rewards"] = "batch"
    assert GRPOLMConfig.model_validate(raw).reward.benign_scale == 0.5
