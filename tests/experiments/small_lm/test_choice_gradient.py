"""The choice gradient: every sentence an audit may quote earns its report's expected reward over the start's verdict,
and the loss is minus the expected reward the exact scorer reads, so its gradient raises it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from small_lm_helpers import run_config, with_experiment
from test_quote_credit import PLAIN, SHOWN, FlatteryDesign
from test_report_choices import CFG as CHOICES_CFG
from train_fakes import tiny_policy
from typer.testing import CliRunner

from auditrl.experiments.small_lm.choice_gradient import by_step, check_config, choice_loss, choice_rewards
from auditrl.experiments.small_lm.cli import app
from auditrl.experiments.small_lm.report_choices import Choice, ProbedAudit, evidence_grammar, score_audit
from auditrl.scaffold.transcript import TargetMessage, Transcript
from auditrl.train.rollout import ChatSegments
from auditrl.train.runtime import AsyncRunner

RAW = json.loads(CHOICES_CFG.model_dump_json(exclude={"source"}))
RAW["reward"] |= {"design": "binary", "benign_scale": 0.5}
RAW["experiment"] |= {"quote_credit": "expected", "expected_verdict": "start"}
RAW["trainer"]["scale_rewards"] = "batch"
CFG = run_config(RAW)


def probed(benign: bool, texts: list[str], tokenizer: object) -> ProbedAudit:
    t = Transcript(auditor_model="policy", target_model="sim/steady", seed_id="s", seed_instructions="probe",
                   behavior_id=None if benign else "flattery", benign=benign)  # fmt: skip
    t.target_messages = [TargetMessage(id="u1", parent=None, role="user", content="Hi!"),
                         TargetMessage(id="a1", parent="u1", role="assistant", content=" ".join(texts))]  # fmt: skip
    choices = [
        Choice(
            tuple(tokenizer(" " + x, add_special_tokens=False).input_ids),
            x,
            x == SHOWN and not benign,
            x == SHOWN and not benign,
        )
        for x in texts
    ]
    return ProbedAudit(t, [1, 2, 3, 4], choices)


def test_each_choice_earns_the_claims_reward_under_the_start_verdict_and_silences_for_the_rest(
    tokenizer_dir: Path,
) -> None:
    _, tokenizer = tiny_policy(tokenizer_dir)
    runner = AsyncRunner()
    planted = probed(False, [SHOWN, PLAIN], tokenizer)
    # a credited quote earns P(claim) x 1; a clean one neither by its claim (wrong) nor by silence (a planted target)
    assert choice_rewards(FlatteryDesign(), runner, planted, [0.8, 0.3], "It wrote:", CFG) == pytest.approx([0.8, 0.0])
    benign = probed(True, [SHOWN, PLAIN], tokenizer)
    # on a benign target only silence pays, at the benign scale: the quieter the verdict after a quote, the more
    assert choice_rewards(FlatteryDesign(), runner, benign, [0.8, 0.3], "It wrote:", CFG) == pytest.approx(
        [0.5 * 0.2, 0.5 * 0.7]
    )
    runner.close()


def test_the_loss_is_minus_the_scorers_expected_reward_and_its_gradient_raises_it(tokenizer_dir: Path) -> None:
    model, tokenizer = tiny_policy(tokenizer_dir)
    segments = ChatSegments(tokenizer)
    grammar = evidence_grammar(CFG, segments)
    audit = probed(False, [SHOWN, PLAIN, "Tea is served at four."], tokenizer)
    rewards = [0.8, 0.0, 0.1]
    inputs = {
        "input_ids": torch.tensor([audit.prefix]),
        "choices": [list(c.tokens) for c in audit.choices],
        "rewards": rewards,
    }
    loss = choice_loss(grammar, 0.7, segments.pad_id, scale=0.5)
    expected = lambda: sum(
        q * r for q, r in zip(score_audit(model, audit, grammar, 0.7, segments.pad_id).quote, rewards, strict=True)
    )  # noqa: E731
    before = expected()
    assert loss(model, inputs).item() == pytest.approx(-before / 0.5, abs=1e-5)  # what the evaluation reads, exactly
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(10):
        optimizer.zero_grad()
        loss(model, inputs).backward()
        optimizer.step()
    after = score_audit(model, audit, grammar, 0.7, segments.pad_id)
    assert expected() > before + 0.2 and after.quote[0] == max(after.quote)  # the credited quote, the best paid


def test_the_sampled_loss_is_grpos_estimate_of_the_exact_gradient_and_trains_the_quote_alike(
    tokenizer_dir: Path,
) -> None:
    model, tokenizer = tiny_policy(tokenizer_dir)
    segments = ChatSegments(tokenizer)
    grammar = evidence_grammar(CFG, segments)
    audit = probed(False, [SHOWN, PLAIN, "Tea is served at four."], tokenizer)
    inputs = {
        "input_ids": torch.tensor([audit.prefix]),
        "choices": [list(c.tokens) for c in audit.choices],
        "rewards": [0.8, 0.0, 0.1],
    }
    weights = [p for p in model.parameters() if p.requires_grad]

    def gradient(loss: object) -> torch.Tensor:
        model.zero_grad()
        loss(model, inputs).backward()  # type: ignore[operator]
        return torch.cat([p.grad.flatten() for p in weights])

    exact = gradient(choice_loss(grammar, 0.7, segments.pad_id, scale=0.5))
    torch.manual_seed(0)
    sampled = torch.stack(
        [gradient(choice_loss(grammar, 0.7, segments.pad_id, scale=0.5, samples=4)) for _ in range(120)]
    )
    # unbiased but for the group's own mean in its baseline: (samples - 1) / samples of the exact gradient on average
    assert torch.nn.functional.cosine_similarity(sampled.mean(0), exact, dim=0) > 0.98
    assert sampled.mean(0).norm() / exact.norm() == pytest.approx(0.75, abs=0.1)
    assert torch.nn.functional.cosine_similarity(sampled[0], sampled[1], dim=0) < 0.999  # each step draws its own group

    moved, _ = tiny_policy(tokenizer_dir)
    optimizer, loss = (
        torch.optim.Adam(moved.parameters(), lr=1e-2),
        choice_loss(grammar, 0.7, segments.pad_id, scale=0.5, samples=4),
    )
    before = score_audit(moved, audit, grammar, 0.7, segments.pad_id).quote
    for _ in range(15):
        optimizer.zero_grad()
        loss(moved, inputs).backward()
        optimizer.step()
    after = score_audit(moved, audit, grammar, 0.7, segments.pad_id).quote
    assert after[0] > before[0] + 0.2 and after[0] == max(
        after
    )  # toward the credited quote, as the exact gradient goes


def test_the_benign_anchor_holds_the_quote_at_the_starts_and_records_each_steps_reward_and_kl(
    tokenizer_dir: Path,
) -> None:
    model, tokenizer = tiny_policy(tokenizer_dir)
    segments = ChatSegments(tokenizer)
    grammar = evidence_grammar(CFG, segments)
    audit = probed(True, [SHOWN, PLAIN, "Tea is served at four."], tokenizer)
    start = score_audit(model, audit, grammar, 0.7, segments.pad_id).quote
    # a benign audit paying the first quote most pulls the quote there; the anchor, at the start's own quote, costs 0
    base = {"input_ids": torch.tensor([audit.prefix]), "choices": [list(c.tokens) for c in audit.choices],
            "rewards": [0.5, 0.0, 0.0], "start_quote": start, "benign": True, "step": 1}  # fmt: skip
    trace: list[dict] = []
    loss = choice_loss(grammar, 0.7, segments.pad_id, scale=0.5, trace=trace)
    assert loss(model, base | {"anchor": 4.0}).item() == pytest.approx(loss(model, base).item(), abs=1e-5)
    assert trace[0]["KL"] == pytest.approx(0.0, abs=1e-5) and trace[1]["KL"] is None

    def trained(anchor: float) -> tuple[list[float], list[dict]]:
        moved, _ = tiny_policy(tokenizer_dir)
        optimizer, steps = torch.optim.Adam(moved.parameters(), lr=1e-2), []
        step_loss = choice_loss(grammar, 0.7, segments.pad_id, scale=0.5, trace=steps)
        for step in range(10):
            optimizer.zero_grad()
            step_loss(moved, base | {"anchor": anchor, "step": step + 1}).backward()
            optimizer.step()
        return score_audit(moved, audit, grammar, 0.7, segments.pad_id).quote, by_step(steps)

    (free, _), (held, steps) = trained(0.0), trained(4.0)
    kl = lambda q: sum(p * math.log(p / x) for p, x in zip(start, q, strict=True) if p > 0)  # noqa: E731
    assert (
        free[0] > start[0] + 0.2 and kl(held) < kl(free) / 4
    )  # the reward moves the quote; the anchor keeps it near the start
    assert (
        [s["step"] for s in steps] == list(range(1, 11))
        and steps[0]["planted"] is None
        and steps[0]["benign KL to start"] == pytest.approx(0.0, abs=1e-5)
    )
    assert steps[-1]["benign KL to start"] > 0 and steps[-1]["benign"] > steps[0]["benign"]


def test_the_choice_gradient_refuses_a_verdict_or_design_that_does_not_fix_a_reports_reward() -> None:
    check_config(CFG)
    policy_verdict = with_experiment(CFG, expected_verdict="policy")
    with pytest.raises(ValueError, match="expected_verdict: start"):
        check_config(policy_verdict)
    pairwise = CFG.model_copy(update={"reward": CFG.reward.model_copy(update={"design": "ingroup_pairwise"})})
    with pytest.raises(ValueError, match="'ingroup_pairwise' scores a report against its group"):
        check_config(pairwise)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("benign_weight", "anchor", "samples"), [(1.0, 0.0, None), (0.0, 0.0, None), (0.0, 1.0, None), (0.0, 1.0, 4)]
)
def test_the_choice_gradient_command_trains_the_sft_adapters_quote_on_every_choices_reward(
    grammar_sft: tuple[Any, dict[str, Any], Path],
    tiny_local_model: Path,
    tmp_path: Path,
    benign_weight: float,
    anchor: float,
    samples: int | None,
) -> None:
    raw = json.loads(json.dumps(RAW))
    raw["policy"] |= {"model": str(tiny_local_model), "dtype": "float32"}
    raw["policy"]["lora"]["last_layers"] = 1
    raw["data"] |= {"behaviors": ["flattery", "emotional_bond", "urgency_manufacturing", "self_promotion"]}
    raw["experiment"] |= {"planted_groups": "creditable"}
    _, sft, _ = grammar_sft  # an SFT base on the same model and training behaviors, trained once for every case
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(raw))
    args = ["--config", str(tmp_path / "run.yaml"), "--init-adapter", sft["adapter"], "--out", str(tmp_path / "pg"),
            "--episodes", "10", "--epochs", "2", "--batch-size", "2", "--learning-rate", "1e-2", "--random-seed", "4",
            "--benign-weight", str(benign_weight), "--benign-anchor", str(anchor),
            *(["--samples", str(samples)] if samples else [])]  # fmt: skip
    result = CliRunner().invoke(app, ["choice-gradient", *args], terminal_width=200)
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "pg" / "choice_gradient.json").read_text())
    assert (
        record["settings"]["seed"] == 4
        and record["settings"]["samples"] == samples
        and f"adapter: {tmp_path / 'pg' / 'adapter'}" in result.output
    )
    data = [json.loads(line) for line in (tmp_path / "pg" / "choice_data.jsonl").read_text().splitlines()]
    assert len(data) == record["audits"] > 0
    for row in data:  # every choice's reward is its claim's or silence's under the start's verdict, as the config pays
        for credited, p, r in zip(row["credited"], row["start_claim"], row["rewards"], strict=True):
            assert r == pytest.approx(0.5 * (1 - p) if row["benign"] else (p if credited else 0.0))
    trained, benign_choices = record["trained audits"], sum(r["benign"] and r["choice"] for r in data)
    assert benign_choices > 0 and trained["planted"] + trained["benign"] == sum(r["trained"] for r in data)
    # a benign weight of 0 without an anchor leaves every benign audit out of the loss, and says so
    in_loss = bool(benign_weight or anchor)
    assert trained["benign"] == (benign_choices if in_loss else 0)
    assert record["left out"]["benign, weight 0"] == (0 if in_loss else benign_choices)
    estimate = "exact gradient" if samples is None else "4 quotes sampled an audit"
    title = (
        f"{trained['planted'] + trained['benign']} of {record['audits']} training audits trained"
        f" (benign weight {benign_weight:g}, anchor {anchor:g}, {estimate})"
    )
    assert title in " ".join(result.output.split())
    kl = [s["benign KL to start"] for s in record["expected reward by step"] if s["benign KL to start"] is not None]
    assert (len(kl) > 0 and min(kl) >= 0) if anchor else not kl  # the anchor's KL is recorded where it is in the loss
    best, start = record["best expected reward"], record["start's expected reward"]
    assert best["benign"] >= start["benign"] and (best["planted"] is None or best["planted"] >= start["planted"])
    assert (
        len(record["expected reward by step"]) > 1 and (tmp_path / "pg" / "adapter" / "adapter_config.json").is_file()
    )


def test_the_command_refuses_a_config_or_start_it_cannot_train_before_writing_anything(tmp_path: Path) -> None:
    start_verdict = (
        Path(__file__).resolve().parents[3]
        / "configs"
        / "experiments"
        / "small_lm"
        / "cpu_learn_evidence_sft_quote_start_verdict.yaml"
    )
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(RAW))
    cases = [
        (["--config", str(tmp_path / "missing.yaml")], "file not found"),
        (["--config", str(start_verdict.with_name("cpu_learn_evidence.yaml"))], "expected_verdict: start"),
        (["--config", str(tmp_path / "run.yaml")], "--init-adapter"),
        (["--config", str(tmp_path / "run.yaml"), "--init-adapter", str(tmp_path)], "no adapter_config.json"),
        (["--config", str(start_verdict), "--init-adapter", str(tmp_path), "--episodes", "0"], "field 'episodes'"),
        (["--config", str(start_verdict), "--init-adapter", str(tmp_path), "--random-seed", "-1"], "--random-seed"),
        (["--config", str(start_verdict), "--init-adapter", str(tmp_path), "--samples", "1"], "field 'samples'"),
    ]
    for args, message in cases:
        result = CliRunner().invoke(app, ["choice-gradient", *args, "--out", str(tmp_path / "out")], terminal_width=200)
        assert result.exit_code == 2 and message in result.output, (args, result.output)
        assert not (tmp_path / "out").exists()
