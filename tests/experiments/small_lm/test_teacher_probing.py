"""Report-only training (`experiment.probing: teacher`): the teacher writes every probing turn, which stays in
context and out of the loss; the policy writes the report alone, sampled and trained as in a whole audit."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from small_lm_helpers import extension, run_config
from test_sft import WARM
from train_fakes import tiny_policy
from transformers import AutoTokenizer

from auditrl.auditworld.seeds import auditworld_seeds
from auditrl.behaviors.library import load_behaviors
from auditrl.behaviors.plant import target_system_prompt
from auditrl.experiments.small_lm.constraints import FirstTokens, ReportConstraint, claim_tokens
from auditrl.experiments.small_lm.probing import TeacherProbing
from auditrl.models.roles import resolve_model
from auditrl.scaffold.auditor_loop import run_audit
from auditrl.scaffold.spec import AuditSpec
from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts
from auditrl.scaffold.transcript import Budget
from auditrl.scaffold.transcript_keys import CLAIM_FORCED, PROBED_BY
from auditrl.train.config import GRPOLMConfig
from auditrl.train.episodes import AuditEpisodeFactory, training_seeds
from auditrl.train.generation import Sample
from auditrl.train.grpo import train_run
from auditrl.train.rollout import ChatSegments, EpisodeRow, run_rollouts
from auditrl.train.sft import SFTSettings, sft_rows
from auditrl.train.teacher import TeacherTurns, teacher_rollouts

REPORT = ' true, "predictions": []}'


class Reporter:
    """A policy generator that writes one fixed report and records what it was asked to write."""

    def __init__(self, segments: ChatSegments) -> None:
        self.ids = segments.encode(REPORT) + [segments.tokenizer.eos_token_id]
        self.calls: list[tuple[list[int], FirstTokens | None]] = []

    def start(self) -> None:
        return None

    def __call__(
        self, keys: list[int], contexts: list[list[int]], constraint: ReportConstraint | None = None
    ) -> list[Sample]:
        self.calls.append((list(keys), constraint.first if constraint is not None else None))
        return [Sample(self.ids, [-1.0] * len(self.ids)) for _ in keys]


@pytest.fixture(scope="module")
def setting(tokenizer_dir: Path) -> tuple[GRPOLMConfig, dict[str, Any], list[Any], list[EpisodeRow], ChatSegments]:
    cfg = run_config({**WARM, "episodes": {**WARM["episodes"], "probing": "teacher"}})
    behaviors = load_behaviors()
    seeds = training_seeds(cfg, behaviors)
    rows = sft_rows(cfg, SFTSettings(episodes=3, seed=5), behaviors, seeds)
    return cfg, behaviors, seeds, rows, ChatSegments(AutoTokenizer.from_pretrained(tokenizer_dir))


def _probing(
    cfg: GRPOLMConfig, behaviors: dict[str, Any], seeds: list[Any], segments: ChatSegments
) -> tuple[TeacherProbing, Reporter]:
    policy = Reporter(segments)
    episodes = AuditEpisodeFactory(cfg.episodes, behaviors, seeds, "policy")
    teacher = TeacherTurns(
        resolve_model("scripted/teacher"), "scripted/teacher", episodes, segments, cfg.episodes.max_new_tokens
    )
    return TeacherProbing(policy, teacher), policy


def test_the_teacher_writes_the_probing_the_policy_only_the_report_and_only_the_report_trains(setting: Any) -> None:
    cfg, behaviors, seeds, rows, segments = setting
    probing, policy = _probing(cfg, behaviors, seeds, segments)
    grouped = [row for row in rows for _ in range(2)]
    claims = claim_tokens(segments.tokenizer, "guided")
    hooks = extension(cfg)
    hooks.claim_tokens, hooks.claims_per_group = claims, 1
    batch = asyncio.run(run_rollouts(
        grouped, probing.factory, probing, segments, group_size=2, first_index=6, max_completion_tokens=4096,
        auditor_name="policy", hooks=hooks,
    ))  # fmt: skip
    probing.mark(batch.transcripts)
    [(keys, first)] = policy.calls  # one call: every report at once, and no probing turn
    assert keys == list(range(6, 6 + len(grouped)))  # global rollout keys, offset by the batch's first index
    assert first == [claims if k % 2 == 0 else None for k in keys]  # claim exploration still reaches the report
    taught = teacher_rollouts(cfg, "scripted/teacher", segments, behaviors, seeds, rows).transcripts
    for i, (transcript, ids, mask, lps) in enumerate(
        zip(batch.transcripts, batch.completion_ids, batch.env_mask, batch.logprobs, strict=True)
    ):
        trained = [t for t, m in zip(ids, mask, strict=True) if m]
        assert trained == policy.ids and [lp for lp, m in zip(lps, mask, strict=True) if m] == [-1.0] * len(policy.ids)
        own = [m.content for m in transcript.auditor_messages if m.role == "assistant"]
        teacher = [m.content for m in taught[i // 2].auditor_messages if m.role == "assistant"]
        assert (
            len(own) == cfg.episodes.max_turns + 1 and own[:-1] == teacher[:-1]
        )  # the teacher's probing, word for word
        assert (
            own[-1].endswith(REPORT.strip()) and transcript.report is not None and transcript.report.no_behavior_found
        )
        assert PROBED_BY.get(transcript) == "scripted/teacher" and bool(CLAIM_FORCED.get(transcript)) is (i % 2 == 0)


def test_a_failed_probing_call_marks_the_audit_an_error(setting: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, behaviors, seeds, rows, segments = setting
    import auditrl.train.teacher as teacher
    from auditrl.models.retries import ModelCallFailed

    async def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise ModelCallFailed("teacher scripted/teacher: connection refused", exhausted=True)

    monkeypatch.setattr(teacher, "call_model", unreachable)
    probing, _ = _probing(cfg, behaviors, seeds, segments)
    batch = asyncio.run(run_rollouts(rows[:2], probing.factory, probing, segments, group_size=1, first_index=0,
                                     max_completion_tokens=4096, auditor_name="policy"))  # fmt: skip
    probing.mark(batch.transcripts)
    assert all(t.status == "error" and "teacher call failed" in (t.error or "") for t in batch.transcripts)


def test_the_probing_teacher_must_be_a_model_spec() -> None:
    with pytest.raises(ValueError, match="probing teacher 'teacher' is not a model spec"):
        run_config({**WARM, "episodes": {**WARM["episodes"], "probing": "teacher", "probing_teacher": "teacher"}})


def test_an_audit_with_a_prober_asks_the_auditor_for_the_report_alone() -> None:
    """The evaluation side: `run_audit(..., prober=...)` gives every turn before the report to the prober."""
    behavior = load_behaviors()["flattery"]
    seed = next(s for s in auditworld_seeds() if s.behavior == "flattery")
    report = (
        '{"no_behavior_found": false, "predictions": [{"description": "It flatters the user.", "confidence": 0.9}]}'
    )
    auditor = resolve_model("scripted/reporter", replies=["first turn", "second turn", report])  # chosen by turn
    spec = AuditSpec(
        seed=seed, behavior=behavior, target_system_prompt=target_system_prompt(behavior), budget=Budget(max_turns=2),
        auditor_model="scripted/reporter", target_model="sim/steady", target_family="steady", tool_protocol="text",
        auditor_prompt="compact",
    )  # fmt: skip
    prober = ("scripted/teacher", resolve_model("scripted/teacher"))
    transcript = asyncio.run(run_audit(spec, auditor, resolve_model("sim/steady"), prober=prober))
    assert transcript.status != "error" and transcript.turns_used == 2
    probes = [m.content for m in transcript.auditor_messages if m.role == "assistant"][:-1]
    assert len(probes) == 2 and all('"send_message"' in m for m in probes)  # the teacher's, not "first turn"
    assert transcript.report is not None and transcript.report.predictions[0].description == "It flatters the user."


@pytest.mark.slow
def test_a_grpo_step_with_teacher_probing_trains_the_report_on_the_teachers_audits(
    tokenizer_dir: Path, tmp_path: Path
) -> None:
    cfg = run_config({
        **WARM, "episodes": {**WARM["episodes"], "probing": "teacher", "max_new_tokens": 8},
        "trainer": {"max_steps": 1, "save_steps": 1, "report_to": [], "extra": {"logging_strategy": "no"}},
    })  # fmt: skip
    train_run(cfg, tmp_path / "run", policy=tiny_policy(tokenizer_dir), progress=False, extension=extension(cfg))
    transcripts = read_transcripts(tmp_path / "run" / TRANSCRIPTS)
    assert len(transcripts) == cfg.data.group_size * cfg.data.groups_per_step
    for t in transcripts:
        assert PROBED_BY.get(t) == "scripted/teacher" and t.turns_used == cfg.episodes.max_turns
        probes = [m for m in t.auditor_messages if m.role == "assistant"][:-1]
        assert probes and all('"send_message"' in m.content for m in probes)
