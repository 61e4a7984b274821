"""`auditrl sft`: a teacher's audits become exactly the token sequences GRPO's rollouts produce, the loss sees
only the auditor's own tokens, and GRPO starts from the adapter (`policy.init_adapter`)."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from peft import PeftModel, get_peft_model
from safetensors.torch import load_file
from test_reference_snapshot import LongerWins
from train_fakes import FakeEpisode, rows_for, tiny_config, tiny_policy
from transformers import AutoTokenizer
from typer.testing import CliRunner

from auditrl.behaviors.library import load_behaviors
from auditrl.cli import app
from auditrl.judges.claim_grader import default_grader
from auditrl.models.lora import IGNORED, labelled_positions_trainer, lora_config
from auditrl.rewards.designs import ReferencePairwise
from auditrl.rewards.reference import ReferenceStore
from auditrl.scaffold.prompt_sets import openings
from auditrl.scaffold.store import read_transcripts, write_transcripts
from auditrl.scaffold.transcript import ToolCallRecord
from auditrl.scaffold.transcript_keys import TEACHER_TURNS_CUT
from auditrl.train.config import GRPOLMConfig, PolicySettings, load_config
from auditrl.train.episodes import AuditEpisodeFactory, split_seeds, training_seeds
from auditrl.train.generation import Sample
from auditrl.train.grpo import build_trainer
from auditrl.train.policy import check_init_adapter, load_policy
from auditrl.train.rollout import ChatSegments, run_rollouts
from auditrl.train.sft import SFTSettings, audit_example, kept, sft_rows, training_examples
from auditrl.train.snapshot import SNAPSHOTS_DIR
from auditrl.train.teacher import TeacherTurns, teacher_rollouts

GUIDED = openings("auditor_openings_guided.yaml")
MESSAGE_ID = re.compile(r'message_id="[^"]*"')


WARM: dict[str, Any] = {
    "kind": "grpo_lm",
    "name": "warm",
    "policy": {
        "model": "smollm2", "lora": {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"], "last_layers": 2},
    },
    "episodes": {
        "target_model": "sim/{family}", "families": ["steady", "pliant"], "max_turns": 2,
        "max_new_tokens": 48, "max_completion_tokens": 1024, "auditor_prompt": "guided",
    },
    "data": {"group_size": 2, "groups_per_step": 4, "seed_bank": "auditworld", "heldout_seeds": 2},
    "trainer": {"max_steps": 1, "report_to": []},
}  # fmt: skip
"""cpu_learn_sft's episode settings at a small scale: guided prompts, AuditWorld seeds, 2 turns of 48 tokens."""


def spans(mask: Sequence[int]) -> list[tuple[int, int]]:
    """(start, end) of each run of 1s: the tokens of each sampled turn."""
    out, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            out.append((start, i))
            start = None
    return out


class Replay:
    """A TurnGenerator that samples the recorded tokens again: what a policy drawing them would get."""

    def __init__(self, turns: dict[int, list[list[int]]]) -> None:
        self.turns = turns
        self.taken: dict[int, int] = {}

    def start(self) -> None:
        self.taken = {}

    def __call__(self, keys: list[int], contexts: list[list[int]]) -> list[Sample]:
        out = []
        for key in keys:
            n = self.taken.get(key, 0)
            self.taken[key] = n + 1
            ids = self.turns[key][n]
            out.append(Sample(ids, [0.0] * len(ids)))
        return out


@pytest.fixture(scope="module")
def teacher_batch(tokenizer_dir: Path) -> tuple[Any, ...]:
    cfg = GRPOLMConfig.model_validate(WARM)
    behaviors = load_behaviors()
    seeds = training_seeds(cfg, behaviors)
    rows = sft_rows(cfg, SFTSettings(episodes=8, seed=3), behaviors, seeds)
    segments = ChatSegments(AutoTokenizer.from_pretrained(tokenizer_dir))
    batch = teacher_rollouts(cfg, "scripted/teacher", segments, behaviors, seeds, rows)
    return cfg, behaviors, seeds, rows, segments, batch


def test_sft_rows_are_distinct_training_rows_with_the_benign_share_and_no_held_out_seed(teacher_batch: Any) -> None:
    cfg, behaviors, seeds, rows, _, _ = teacher_batch
    assert len(rows) == len(set(rows)) == 8 and sum(r.benign for r in rows) == 4
    everything = cfg.model_copy(update={"data": cfg.data.model_copy(update={"heldout_seeds": 0})})
    held_out = {s.id for s in split_seeds(training_seeds(everything, behaviors), 2)[1]}
    assert held_out and not {r.seed_id for r in rows} & held_out
    assert all(behaviors[r.behavior_id or ""].split == "train" for r in rows if not r.benign)
    assert all(r.seed_id.startswith("sim-") for r in rows)


def test_teacher_sequences_are_the_rollout_sequences_of_the_same_tokens(teacher_batch: Any) -> None:
    cfg, behaviors, seeds, rows, segments, batch = teacher_batch
    turns = {
        i: [c[a:b] for a, b in spans(m)]
        for i, (c, m) in enumerate(zip(batch.completion_ids, batch.env_mask, strict=True))
    }
    factory = AuditEpisodeFactory(cfg.episodes, behaviors, seeds, "policy/warm")
    replay = asyncio.run(
        run_rollouts(rows, factory, Replay(turns), segments, group_size=1, first_index=0,
                     max_completion_tokens=cfg.episodes.max_completion_tokens, auditor_name="policy/warm")
    )  # fmt: skip
    assert replay.prompt_ids == batch.prompt_ids
    decode = segments.tokenizer.decode
    for ours, theirs, our_mask, their_mask in zip(
        replay.completion_ids, batch.completion_ids, replay.env_mask, batch.env_mask, strict=True
    ):
        assert [ours[a:b] for a, b in spans(our_mask)] == [theirs[a:b] for a, b in spans(their_mask)]
        assert MESSAGE_ID.sub("", decode(ours)) == MESSAGE_ID.sub("", decode(theirs))  # ids are fresh per run
    for ours, theirs in zip(replay.transcripts, batch.transcripts, strict=True):
        assert [MESSAGE_ID.sub("", m.content) for m in ours.auditor_messages] == [
            MESSAGE_ID.sub("", m.content) for m in theirs.auditor_messages
        ]
    eos = segments.tokenizer.eos_token_id
    opening = segments.encode(GUIDED["audit"])
    for completion, mask, t in zip(batch.completion_ids, batch.env_mask, batch.transcripts, strict=True):
        assert t.status == "budget_exhausted" and t.report is not None and t.report.parse_error is None
        runs = spans(mask)
        assert len(runs) == 3  # two turns and the report, each closed by the end-of-turn token it must learn
        assert all(completion[b - 1] == eos for _, b in runs)
        first = runs[0][0]
        assert completion[first - len(opening) : first] == opening and not any(mask[first - len(opening) : first])


def test_the_loss_sees_only_the_auditors_own_tokens(teacher_batch: Any) -> None:
    *_, segments, batch = teacher_batch
    examples = training_examples(batch, "parsed")
    assert len(examples) == len(batch.transcripts)
    for e, prompt, completion, mask in zip(
        examples, batch.prompt_ids, batch.completion_ids, batch.env_mask, strict=True
    ):
        assert e["input_ids"] == prompt + completion
        labels = e["labels"]
        assert labels[: len(prompt)] == [IGNORED] * len(prompt)
        assert [lab != IGNORED for lab in labels[len(prompt) :]] == [bool(m) for m in mask]
        trained = segments.tokenizer.decode([t for t in labels if t != IGNORED])
        assert "target_response" not in trained and "The audit is over" not in trained  # no environment text
        assert '{"name": "send_message"' not in trained  # the begun words are context, not targets


def test_an_audit_that_identifies_its_behavior_is_repeated_and_no_other_is(teacher_batch: Any) -> None:
    *_, batch = teacher_batch
    grader = default_grader()
    found = {t.id for t in batch.transcripts if grader.identifies(t)}
    assert found and len(found) < len(batch.transcripts)  # the fixture holds both kinds, or this shows nothing
    once = training_examples(batch, "parsed")
    thrice = training_examples(batch, "parsed", repeats=lambda t: 3 if grader.identifies(t) else 1)
    counts = Counter(e["transcript"] for e in thrice)
    assert counts == {e["transcript"]: 3 if e["transcript"] in found else 1 for e in once}
    repeated = [e for e in thrice if e["transcript"] in found]
    assert all(e == repeated[0] for e in repeated[:3])


class FixedLogits(torch.nn.Module):
    """A model whose logits are a fixed tensor, so the loss can be computed by hand."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = logits

    def forward(self, input_ids: torch.Tensor, attention_mask: Any = None, logits_to_keep: Any = None) -> Any:
        return type("Out", (), {"logits": self.logits[:, logits_to_keep]})()


def test_a_token_weight_counts_that_token_that_many_times_and_nothing_else() -> None:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 6, 10, generator=generator)
    labels = torch.tensor([[IGNORED, 4, IGNORED, IGNORED, 3, 9], [IGNORED, IGNORED, 4, 3, 3, IGNORED]])
    inputs = {"input_ids": torch.zeros(2, 6, dtype=torch.long), "labels": labels}
    per_token = -torch.log_softmax(logits[:, :-1], -1).gather(-1, labels[:, 1:].clamp(min=0).unsqueeze(-1)).squeeze(-1)
    per_token = per_token * (labels[:, 1:] != IGNORED)
    plain = labelled_positions_trainer(object)().compute_loss(FixedLogits(logits), inputs)
    assert plain.item() == pytest.approx(per_token.sum().item() / 6, rel=1e-5)
    weighted = labelled_positions_trainer(object, lambda labels: {labels.index(3): 5.0})().compute_loss(
        FixedLogits(logits), inputs
    )
    verdicts = per_token[0, 3] + per_token[1, 2]  # each row's first 3: label positions 4 and 3
    assert weighted.item() == pytest.approx((per_token.sum() + 4.0 * verdicts).item() / 6, rel=1e-5)


def test_a_turn_is_cut_at_its_budget_as_a_rollout_would_be(teacher_batch: Any) -> None:
    cfg, behaviors, seeds, rows, segments, _ = teacher_batch
    factory = AuditEpisodeFactory(cfg.episodes, behaviors, seeds, "t")
    turns = TeacherTurns(None, "scripted/teacher", factory, segments, max_new_tokens=5, max_report_tokens=9)  # type: ignore[arg-type]
    try:
        episode = turns.factory(rows[0])
        short, long = turns._sample(0, "Hi"), turns._sample(0, "word " * 40)
        episode.phase = "report"
        report = turns._sample(0, "word " * 40)
    finally:
        turns.close()
    assert short.ids[-1] == segments.tokenizer.eos_token_id and len(short.ids) == len(segments.encode("Hi")) + 1
    assert len(long.ids) == 5 and segments.tokenizer.eos_token_id not in long.ids
    assert len(report.ids) == 9  # the report turn has its own, longer budget
    assert turns.live[0].transcript.metadata[TEACHER_TURNS_CUT] == 2


def test_a_failed_teacher_audit_is_recorded_and_never_trained_on(
    teacher_batch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg, behaviors, seeds, rows, segments, _ = teacher_batch
    import auditrl.train.teacher as teacher
    from auditrl.models.retries import ModelCallFailed

    async def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise ModelCallFailed("teacher scripted/teacher: connection refused", exhausted=True)

    monkeypatch.setattr(teacher, "call_model", unreachable)
    batch = teacher_rollouts(cfg, "scripted/teacher", segments, behaviors, seeds, rows[:2], attempts=1)
    assert all(t.status == "error" and "teacher call failed" in (t.error or "") for t in batch.transcripts)
    assert not any(kept(t, "all") for t in batch.transcripts) and training_examples(batch, "all") == []


def test_a_warm_start_must_match_the_policys_model_and_lora(tmp_path: Path) -> None:
    settings = PolicySettings(
        model="smollm2", init_adapter=tmp_path, lora={"r": 4, "alpha": 8, "target_modules": ["q_proj"]}
    )
    with pytest.raises(ValueError, match="no adapter_config.json"):
        check_init_adapter(settings)
    config = {
        "base_model_name_or_path": "smollm2",
        "r": 4,
        "lora_alpha": 8,
        "lora_dropout": 0.0,
        "target_modules": ["q_proj"],
    }
    (tmp_path / "adapter_config.json").write_text(json.dumps(config))
    check_init_adapter(settings)
    (tmp_path / "adapter_config.json").write_text(json.dumps({**config, "r": 16}))
    with pytest.raises(ValueError, match="r=16, but policy.lora.r is 4"):
        check_init_adapter(settings)
    (tmp_path / "adapter_config.json").write_text(json.dumps({**config, "base_model_name_or_path": "other"}))
    with pytest.raises(ValueError, match="trained on 'other'"):
        check_init_adapter(settings)


@pytest.mark.slow
def test_grpo_trains_on_from_the_init_adapter_and_its_first_reference_is_that_adapter(
    tokenizer_dir: Path, tmp_path: Path
) -> None:
    cfg = tiny_config(max_steps=1)  # four groups of two: a step where every group ties (no gradient) is unlikely
    cfg = cfg.model_copy(update={"data": cfg.data.model_copy(update={"groups_per_step": 4})})
    base, tokenizer = tiny_policy(tokenizer_dir)
    warm = get_peft_model(base, lora_config(cfg.policy.lora, base))
    for name, p in warm.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.05)
    warm.save_pretrained(str(tmp_path / "warm"))
    start = {n: t.clone() for n, t in load_file(str(tmp_path / "warm" / "adapter_model.safetensors")).items()}
    fresh, _ = tiny_policy(tokenizer_dir)
    policy = PeftModel.from_pretrained(fresh, str(tmp_path / "warm"), is_trainable=True)
    trainer, _, reward = build_trainer(
        cfg, tmp_path / "run", factory=lambda row: FakeEpisode(row),
        design=ReferencePairwise(LongerWins(), ReferenceStore()),
        rows=rows_for(steps=1, groups=4), policy=(policy, tokenizer),
    )  # fmt: skip
    trainer.train()
    reward.runner.close()
    snapshot = load_file(str(next((tmp_path / "run" / SNAPSHOTS_DIR).glob("*.safetensors"))))
    lora_b = sorted(n for n in snapshot if "lora_B" in n)
    assert lora_b and all(float(snapshot[n].abs().sum()) > 0 for n in lora_b)  # the reference is the warm adapter
    assert sum(float(t.abs().sum()) for t in start.values()) == pytest.approx(
        sum(float(t.abs().sum()) for t in snapshot.values())
    )
    moved = {n: p.detach() for n, p in trainer.model.named_parameters() if "lora_" in n}
    assert all(p.requires_grad for n, p in trainer.model.named_parameters() if "lora_" in n)
    assert any(not torch.equal(p, snapshot[n]) for n, p in moved.items() if n in snapshot)  # and it trained on


@pytest.mark.slow
def test_the_sft_command_writes_an_adapter_that_a_config_warm_starts_from(tmp_path: Path) -> None:
    """`auditrl sft` end to end on the offline SmolLM2 (2 of its layers adapted, 4 teacher audits, 2 steps); a
    config naming the adapter relative to itself loads it as the trainable starting policy."""
    (tmp_path / "warm.yaml").write_text(yaml.safe_dump(WARM))
    args = ["--config", str(tmp_path / "warm.yaml"), "--out", str(tmp_path / "sft"), "--episodes", "4", "--epochs", "1",
            "--batch-size", "2", "--learning-rate", "1e-3", "--random-seed", "3", "--max-retries", "1",
            "--timeout", "60"]  # fmt: skip
    result = CliRunner().invoke(app, ["sft", *args], terminal_width=200)
    assert result.exit_code == 0, result.output
    adapter = tmp_path / "sft" / "adapter"
    assert f"init_adapter: {adapter}" in result.output and "4 of 4 audits kept" in result.output
    record = json.loads((tmp_path / "sft" / "sft.json").read_text())
    assert record["settings"]["seed"] == 3 and record["settings"]["teacher_calls"] == {"max_retries": 1, "timeout": 60}
    assert (
        record["kept"] == 4 and len(record["loss"]) == 2 and 0 < record["tokens"]["trained"] < record["tokens"]["total"]
    )
    assert json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == "smollm2"
    assert len((tmp_path / "sft" / "teacher" / "transcripts.jsonl").read_text().splitlines()) == 4
    (tmp_path / "grpo.yaml").write_text(
        yaml.safe_dump({**WARM, "policy": {**WARM["policy"], "init_adapter": "sft/adapter"}})
    )
    policy = load_config(tmp_path / "grpo.yaml").policy
    assert policy.init_adapter == adapter
    model, _ = load_policy(policy)
    saved = load_file(str(adapter / "adapter_model.safetensors"))
    params = dict(model.named_parameters())
    assert isinstance(model, PeftModel) and any(float(t.abs().sum()) > 0 for n, t in saved.items() if "lora_B" in n)
    for name, tensor in saved.items():
        live = params[name.replace(".weight", ".default.weight")]
        assert live.requires_grad and torch.equal(live.detach().to(tensor.dtype), tensor)
    wrong = policy.model_copy(update={"lora": policy.lora.model_copy(update={"last_layers": 3})})
    with pytest.raises(ValueError, match="last_layers=3"):
        load_policy(wrong)


def test_train_refuses_a_warm_start_that_is_no_adapter_before_writing_anything(tmp_path: Path) -> None:
    (tmp_path / "grpo.yaml").write_text(
        yaml.safe_dump({**WARM, "policy": {**WARM["policy"], "init_adapter": "nowhere"}})
    )
    result = CliRunner().invoke(app, ["train", "--config", str(tmp_path / "grpo.yaml"), "--out", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and f"field 'policy.init_adapter' ({str(tmp_path / 'nowhere')!r}): no adapter_config.json" in lines[0]
    )
    assert not (tmp_path / "run").exists()


def test_the_command_refuses_bad_options_in_one_line_before_any_model_loads(tmp_path: Path) -> None:
    config = Path(__file__).resolve().parents[2] / "configs" / "experiments" / "small_lm" / "cpu_learn_sft.yaml"
    cases = [
        (["--config", str(tmp_path / "missing.yaml")], "file not found"),
        (["--config", str(config), "--keep", "some"], "field 'keep'"),
        (["--config", str(config), "--teacher", "nope"], "<provider>/<model>"),
        (["--config", str(config), "--episodes", "0"], "field 'episodes'"),
        (["--config", str(config), "--random-seed", "-1"], "--random-seed"),
        (["--config", str(config), "--timeout", "0"], "--timeout"),
        (["--config", str(config.with_name("cpu_learn_evidence.yaml"))], "python -m auditrl.experiments.small_lm sft"),
    ]
    for args, message in cases:
        result = CliRunner().invoke(app, ["sft", *args, "--out", str(tmp_path / "out")], terminal_width=200)
        assert result.exit_code == 2 and message in result.output, result.output
        assert not (tmp_path / "out").exists()


PLAIN = {**WARM, "episodes": {**WARM["episodes"], "auditor_prompt": "compact", "max_new_tokens": 256}}
"""WARM with whole turns written by the auditor (no begun words) and room for every teacher turn."""


@pytest.fixture(scope="module")
def plain_batch(tokenizer_dir: Path) -> tuple[Any, ...]:
    cfg = GRPOLMConfig.model_validate(PLAIN)
    behaviors = load_behaviors()
    seeds = training_seeds(cfg, behaviors)
    rows = sft_rows(cfg, SFTSettings(episodes=4, seed=3), behaviors, seeds)
    segments = ChatSegments(AutoTokenizer.from_pretrained(tokenizer_dir))
    return cfg, segments, teacher_rollouts(cfg, "scripted/teacher", segments, behaviors, seeds, rows)


def test_a_stored_audit_is_the_token_sequence_its_rollout_was(plain_batch: Any) -> None:
    """Read back from its transcript alone, an audit is token for token the sequence its rollout produced, trained on
    the same positions: so a run's stored audits distil as the teacher's own rollouts do."""
    _, segments, batch = plain_batch
    assert not any(TEACHER_TURNS_CUT.get(t) for t in batch.transcripts)  # every turn whole, closed by its end of turn
    rollouts = training_examples(batch, "all")
    assert len(rollouts) == len(batch.transcripts) == 4
    for transcript, rollout in zip(batch.transcripts, rollouts, strict=True):
        assert audit_example(transcript, segments) == rollout
    native = batch.transcripts[0].model_copy(deep=True)
    turn = next(m for m in native.auditor_messages if m.role == "assistant")
    turn.tool_calls = [ToolCallRecord(id="call_1", function="end_conversation", arguments={})]
    assert audit_example(native, segments) is None  # native tool calls have no text-protocol sequence


def test_sft_from_a_directory_of_stored_audits_trains_an_adapter_on_the_parsed_ones(
    plain_batch: Any, tiny_local_model: Path, tmp_path: Path
) -> None:
    """`auditrl sft --from` at tiny size: a folder of stored transcripts, one of them failed and one unparsed."""
    cfg, _, batch = plain_batch
    audits = [t.model_copy(deep=True) for t in batch.transcripts]
    audits[0].status, audits[0].error = "error", "target unreachable"
    audits[1].report = audits[1].report.model_copy(update={"parse_error": "cut off"})  # type: ignore[union-attr]
    write_transcripts(tmp_path / "audits" / "api-auditor" / "transcripts.jsonl", audits)
    raw = {**PLAIN, "policy": {**PLAIN["policy"], "model": str(tiny_local_model), "dtype": "float32",
                               "lora": {**PLAIN["policy"]["lora"], "last_layers": 1}}}  # fmt: skip
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(raw))
    args = ["--config", str(tmp_path / "tiny.yaml"), "--from", str(tmp_path / "audits"), "--out", str(tmp_path / "sft"),
            "--epochs", "1", "--batch-size", "2", "--random-seed", "3"]  # fmt: skip
    result = CliRunner().invoke(app, ["sft", *args], terminal_width=200)
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "sft" / "sft.json").read_text())
    assert record["from"] == str(tmp_path / "audits") and record["episodes"] == 4 and record["kept"] == 2
    assert record["left out"] == {"not kept": 2, "native tool calls or no turn": 0} and len(record["loss"]) == 1
    data = [json.loads(line) for line in (tmp_path / "sft" / "sft_data.jsonl").read_text().splitlines()]
    assert [d["transcript"] for d in data] == [t.id for t in audits[2:]]
    assert len(read_transcripts(tmp_path / "sft" / "distilled" / "transcripts.jsonl")) == 2
    assert (tmp_path / "sft" / "adapter" / "adapter_config.json").is_file()
    assert "2 of 4 audits kept" in " ".join(result.output.split())  # the table's title, however it wraps


def test_sft_from_refuses_what_it_cannot_use_in_one_line_before_any_model_loads(tmp_path: Path) -> None:
    (tmp_path / "warm.yaml").write_text(yaml.safe_dump(WARM))
    (tmp_path / "empty").mkdir()
    base = ["sft", "--config", str(tmp_path / "warm.yaml"), "--out", str(tmp_path / "out")]
    cases = [
        ([*base, "--from", str(tmp_path / "empty")], "no stored audits"),
        ([*base, "--min-score", "50"], "give them with --from RUN"),
        ([*base, "--from", str(tmp_path / "empty"), "--judge", "programmatic"], "give --min-score too"),
        ([*base, "--from", str(tmp_path / "empty"), "--min-score", "101"], "--min-score"),
    ]
    for args, message in cases:
        result = CliRunner().invoke(app, args, terminal_width=200)
        assert result.exit_code == 2 and message in result.output, result.output
        assert not (tmp_path / "out").exists()
