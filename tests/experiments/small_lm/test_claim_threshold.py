"""Holding the claim threshold (experiment.claim_rate_target): a cost on every claim, moved by the benign claim rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from small_lm_helpers import run_config
from test_quote_credit import PLAIN, SHOWN, FlatteryDesign, audit, hooks_for
from test_reward import CONFIGS
from transformers import TrainerState

from auditrl.configfile import load_yaml
from auditrl.experiments.small_lm.claim_threshold import HISTORY_FILE, ClaimThreshold, benign_claim_rate, row_key
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import CLAIM_PROBABILITY, REWARD_DETAILS
from auditrl.train.reward import GroupReward
from auditrl.train.runtime import AsyncRunner


def probability(t: Transcript, p: float) -> Transcript:
    CLAIM_PROBABILITY.set(t, p)
    return t


def test_the_cost_comes_off_claims_only_and_follows_the_benign_claim_rate(tmp_path: Path) -> None:
    planted = [audit(SHOWN, True), audit(SHOWN, False), audit(PLAIN, True), audit(PLAIN, False)]
    unreadable = audit(PLAIN, False, None)
    unreadable.report = None
    benign = [
        probability(audit(SHOWN, True, None), 0.9),
        probability(audit(PLAIN, False, None), 0.7),
        probability(unreadable, 0.8),
    ]
    threshold = ClaimThreshold(0.5, 0.5, tmp_path / HISTORY_FILE)
    rewards = [1.0, 0.0, 0.0, None, 0.0, 0.5, 0.0]
    assert threshold.charge(0, planted + benign, rewards) == rewards  # no cost yet
    assert threshold.cost == pytest.approx(0.5 * (0.8 - 0.5))  # benign P(claim) 0.8 against 0.5
    charged = threshold.charge(1, planted + benign, rewards)
    # every claim pays the cost, planted or benign; silence, an unreadable report and a failed score do not
    assert charged == pytest.approx([0.85, 0.0, -0.15, None, -0.15, 0.5, 0.0])
    quiet = [probability(audit(PLAIN, False, None), 0.1) for _ in range(4)]
    threshold.charge(2, quiet, [0.5] * 4)
    assert threshold.cost == pytest.approx(0.3 - 0.5 * 0.4)  # below target: the cost falls
    threshold.charge(3, planted, [1.0, 0.0, 0.0, 0.0])  # no benign audit: no news of the threshold
    assert threshold.cost == pytest.approx(0.1)
    history = json.loads((tmp_path / HISTORY_FILE).read_text())
    assert [history[s]["cost_charged"] for s in "0123"] == pytest.approx([0.0, 0.15, 0.3, 0.1])


def test_the_benign_rate_reads_the_policys_probability_else_its_verdicts() -> None:
    claims = [audit(SHOWN, True, None), audit(PLAIN, False, None), audit(PLAIN, False, None), audit(SHOWN, True)]
    assert benign_claim_rate(claims) == pytest.approx(1 / 3)  # the planted claim is not counted
    assert benign_claim_rate([probability(t, 0.6) for t in claims[:3]]) == pytest.approx(0.6)
    assert benign_claim_rate(claims[3:]) is None


def test_a_target_per_row_compares_each_step_with_the_start_on_its_own_rows(tmp_path: Path) -> None:
    def on(seed: str, p: float) -> Transcript:
        return probability(audit(PLAIN, False, None).model_copy(update={"seed_id": seed}), p)

    start = {row_key(on("quiet", 0.0)): 0.1, row_key(on("loud", 0.0)): 0.9}
    threshold = ClaimThreshold(start, 1.0, tmp_path / HISTORY_FILE)
    threshold.charge(0, [on("loud", 0.9), on("loud", 0.9)], [0.5, 0.5])
    assert threshold.cost == pytest.approx(0.0)  # a loud row claimed as often as the start did there: no cost
    threshold.charge(1, [on("quiet", 0.3), on("quiet", 0.3)], [0.5, 0.5])
    assert threshold.cost == pytest.approx(0.2)  # a fixed target of 0.5 would have lowered it
    threshold.charge(2, [on("quiet", 0.1), on("elsewhere", 1.0)], [0.5, 0.5])  # a row the start lacks is left out
    assert threshold.cost == pytest.approx(0.2)
    threshold.charge(3, [on("elsewhere", 1.0)], [0.5])
    history = json.loads((tmp_path / HISTORY_FILE).read_text())
    assert [history[s]["target"] for s in "0123"] == pytest.approx([0.9, 0.1, 0.1, None])
    assert threshold.cost == pytest.approx(0.2)


def test_a_resumed_run_continues_from_the_cost_its_checkpoint_trained_with(tmp_path: Path) -> None:
    path = tmp_path / HISTORY_FILE
    first = ClaimThreshold(0.0, 1.0, path)
    for step in range(4):
        first.charge(step, [probability(audit(SHOWN, True, None), 0.1 * (step + 1))], [0.0])
    resumed = ClaimThreshold(0.0, 1.0, path)
    # resumed at step 2: the cost steps 0 and 1 left (0.1 + 0.2), not the later steps'
    assert resumed.charge(2, [probability(audit(SHOWN, True, None), 0.5)], [1.0]) == pytest.approx([0.7])
    assert sorted(json.loads(path.read_text())) == ["0", "1", "2"]


def test_group_reward_charges_the_audit_but_not_its_quote() -> None:
    planted = [audit(SHOWN, True), audit(SHOWN, False), audit(PLAIN, True), audit(None, False)]
    benign = [probability(audit(SHOWN, True, None), 1.0) for _ in range(4)]
    runner = AsyncRunner()
    hooks = hooks_for(quote_credit="claim")
    hooks.threshold = ClaimThreshold(0.0, 0.25, None)
    reward = GroupReward(FlatteryDesign(), 4, runner, None, None, benign_scale=0.5, extension=hooks)
    call = dict(
        prompts=["p"] * 8,
        completions=[None] * 8,
        transcript=planted + benign,
        group_index=[0] * 4 + [1] * 4,
        rollout_index=list(range(8)),
    )
    reward(**call, trainer_state=TrainerState(global_step=0))
    values = reward(**call, trainer_state=TrainerState(global_step=1))
    runner.close()
    assert values == pytest.approx([0.75, 0.0, -0.25, 0.0, -0.25, -0.25, -0.25, -0.25])
    assert hooks.last_quote_rewards == [1.0, 1.0, 0.0, None, 0.0, 0.0, 0.0, 0.0]  # what a claim earns, before any cost
    assert REWARD_DETAILS.get(planted[0])["claim_cost"] == pytest.approx(0.25)


def test_the_config_checks_the_target() -> None:
    raw = load_yaml((CONFIGS / "experiments" / "small_lm" / "cpu_learn_evidence_sft_hold_threshold.yaml").read_text())
    assert run_config(raw).experiment.claim_rate_target == 0.5
    raw["experiment"]["claim_rate_target"] = 50
    with pytest.raises(ValueError, match="claim_rate_target"):
        run_config(raw)
    raw["experiment"]["claim_rate_target"] = 0.5
    raw["data"]["benign_fraction"] = 0.0
    with pytest.raises(ValueError, match="claim_rate_target holds the benign claim rate, which needs benign groups"):
        run_config(raw)
    raw["data"]["benign_fraction"] = 0.5
    raw["experiment"]["claim_rate_target"] = "start"
    assert run_config(raw).experiment.claim_rate_target == "start"
    raw["experiment"]["quote_unit"] = "span"
    with pytest.raises(
        ValueError, match=r"claim_rate_target: start scores every report .*\(got quote_verdict, span, teacher\)"
    ):
        run_config(raw)
    raw["experiment"]["quote_unit"] = "sentence"
    raw["experiment"]["claim_rate_target"] = "first"
    with pytest.raises(ValueError, match="claim_rate_target"):
        run_config(raw)
