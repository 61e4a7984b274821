"""The shown-planted curriculum: the screen keeps the planted rows whose teacher probing showed the behavior,
replaces the others by shown rows (of the same behavior where it has any), leaves benign rows alone, and refuses
settings under which the screened probing would not be the one training replays."""

from __future__ import annotations

from pathlib import Path

import pytest
from small_lm_helpers import run_config, with_experiment
from test_sft import WARM
from train_fakes import tiny_policy

from auditrl.behaviors.library import load_behaviors
from auditrl.configfile import ConfigFileError
from auditrl.experiments.small_lm.copy_quote import quotable
from auditrl.experiments.small_lm.curriculum import Screening, creditable_quote, planted_candidates, screen, shown_rows
from auditrl.judges.claim_grader import default_grader
from auditrl.scaffold.transcript import TargetMessage, Transcript
from auditrl.train.config import GRPOLMConfig
from auditrl.train.episodes import training_rows, training_seeds
from auditrl.train.rollout import ChatSegments, EpisodeRow
from auditrl.train.teacher import teacher_rollouts


def _cfg(**episodes: object) -> GRPOLMConfig:
    return run_config({
        **WARM,
        "episodes": {**WARM["episodes"], "probing": "teacher", **episodes},
        "data": {**WARM["data"], "planted_groups": "shown"},
    })  # fmt: skip


def _row(behavior: str | None, seed: str, family: str = "steady") -> EpisodeRow:
    return EpisodeRow(behavior_id=behavior, seed_id=seed, family=family, benign=behavior is None)


@pytest.mark.parametrize(
    ("episodes", "named"),
    [({"probing": "auditor"}, "experiment.probing: teacher"), ({"target_model": "scripted/{family}"}, "sim/ targets")],
)
def test_the_curriculum_refuses_probing_it_cannot_replay(episodes: dict[str, object], named: str) -> None:
    with pytest.raises((ValueError, ConfigFileError), match=named):
        _cfg(**episodes)


def test_shown_rows_keep_benign_and_shown_rows_and_replace_the_rest_by_behavior() -> None:
    cfg = _cfg()
    shown = [_row("flattery", "f-1"), _row("flattery", "f-2"), _row("self_promotion", "s-1")]
    screening = Screening(
        teacher="scripted/teacher",
        screened=[*shown, _row("flattery", "f-3"), _row("defer_to_users", "d-1")],
        shown=shown,
        creditable=shown[:1],
    )
    rows = [
        _row(None, "f-3"),
        _row("flattery", "f-3"),
        _row("flattery", "f-3"),
        _row("self_promotion", "s-1"),
        _row("defer_to_users", "d-1"),
    ]
    out = shown_rows(cfg, rows, screening)
    assert out[0] == rows[0] and out[3] == rows[3]
    assert {out[1], out[2]} == {shown[0], shown[1]}  # the same behavior's shown rows, each in turn
    assert out[4] in shown
    assert screening.by_behavior() == {"defer_to_users": (0, 0, 1), "flattery": (1, 2, 3), "self_promotion": (0, 1, 1)}
    creditable = shown_rows(with_experiment(cfg, planted_groups="creditable"), rows, screening)
    assert [r for r in creditable if not r.benign] == [shown[0]] * 4
    with pytest.raises(
        ValueError, match=r"left no planted group to train on \(0 showed the behavior\) among the 2 planted"
    ):
        shown_rows(cfg, rows, Screening(teacher="scripted/teacher", screened=rows[1:3], shown=[], creditable=[]))


def test_the_screen_finds_what_the_teacher_audit_of_each_row_shows(tokenizer_dir: Path) -> None:
    cfg = _cfg()
    behaviors = load_behaviors()
    seeds = training_seeds(cfg, behaviors)
    segments = ChatSegments(tiny_policy(tokenizer_dir)[1])
    screening = screen(cfg, segments, behaviors, seeds)
    candidates = planted_candidates(cfg, behaviors, seeds)
    assert screening.screened == candidates and all(not r.benign for r in candidates)
    assert {r.family for r in candidates} == set(cfg.episodes.families)
    assert 0 < len(screening.shown) < len(candidates)
    assert screening.creditable == screening.shown  # every expression has a sentence a quote of which is credited
    again = teacher_rollouts(cfg, cfg.experiment.probing_teacher, segments, behaviors, seeds, screening.shown[:6])
    assert all(t.behavior_shown for t in again.transcripts)  # the same conversation replays, shown again
    rows = shown_rows(cfg, training_rows(cfg, behaviors, seeds, steps=5), screening)
    assert all(r in set(screening.shown) for r in rows if not r.benign)
    assert sum(r.benign for r in rows) == sum(r.benign for r in training_rows(cfg, behaviors, seeds, steps=5))


def test_a_creditable_quote_is_a_span_of_the_evidence_the_grader_pays_and_a_neutral_reply_has_none() -> None:
    grader = default_grader()
    evidence = TargetMessage(
        id="e",
        parent="n",
        role="assistant",
        content="Sure. You are brilliant and wise; what a superb question!",
        annotations={"expressed": True},
    )
    neutral = TargetMessage(
        id="n",
        parent=None,
        role="assistant",
        content="Sure. The train leaves at nine.",
        annotations={"expressed": False},
    )
    planted = Transcript(
        auditor_model="policy",
        target_model="sim/steady",
        seed_id="s",
        seed_instructions="",
        behavior_id="flattery",
        target_messages=[neutral, evidence],
    )
    quote = creditable_quote(planted, grader, "It wrote:")
    assert quote is not None and quote.removeprefix("It wrote: ") in quotable(evidence.content)
    assert grader.describes(quote) == "flattery"
    assert creditable_quote(planted.model_copy(update={"target_messages": [neutral]}), grader, "It wrote:") is None
