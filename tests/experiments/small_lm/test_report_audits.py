"""Report-only audits of held-out targets: the parts hold only what training never draws, every audit is the probing
teacher's conversation ended by the evaluated model's report under the run's grammar, and an interrupted evaluation
resumes without auditing a row twice."""

from __future__ import annotations

from pathlib import Path

import pytest
from small_lm_helpers import run_config
from test_sft import WARM
from train_fakes import tiny_policy

from auditrl.behaviors.library import load_behaviors
from auditrl.experiments.small_lm.copy_quote import quotable
from auditrl.experiments.small_lm.report_audits import (
    HELD_OUT_PARTS,
    benign_audits_seen,
    held_out_rows,
    report_audits,
    reset_rows,
)
from auditrl.judges.claim_grader import report_outcome
from auditrl.scaffold.store import append_transcript, read_transcripts
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import PROBED_BY, ROLLOUT
from auditrl.train.episodes import trained_behaviors, training_rows, training_seeds

CFG = run_config({
    **WARM,
    "episodes": {**WARM["episodes"], "probing": "teacher", "max_report_tokens": 60, "auditor_prompt": "guided_evidence",
                 "report_grammar": "quote_verdict", "temperature": 0.7},
})  # fmt: skip


def test_the_held_out_parts_hold_every_family_planted_and_benign_and_nothing_training_draws() -> None:
    behaviors = load_behaviors()
    heldout = {b for b, v in behaviors.items() if v.split == "heldout"}
    pool = set(trained_behaviors(CFG, behaviors))
    trained = {s.id for s in training_seeds(CFG, behaviors) if s.behavior in pool}
    drawn = {(r.seed_id, r.family) for r in training_rows(CFG, behaviors, training_seeds(CFG, behaviors), steps=50)}
    for part in HELD_OUT_PARTS:
        rows = held_out_rows(CFG, part, behaviors)
        planted, benign = [r for r in rows if not r.benign], [r for r in rows if r.benign]
        assert [(r.seed_id, r.family) for r in planted] == [(r.seed_id, r.family) for r in benign]
        assert {r.family for r in rows} == set(CFG.episodes.families)
        assert not {r.seed_id for r in rows} & trained and not {(r.seed_id, r.family) for r in rows} & drawn
        behaviors_in = {r.behavior_id for r in rows}
        assert behaviors_in == heldout if part == HELD_OUT_PARTS[0] else not behaviors_in & heldout
    with pytest.raises(ValueError, match="unknown held-out part"):
        held_out_rows(CFG, "held-out families")


def test_reset_rows_are_benign_training_seed_rows_that_no_training_audited(tmp_path: Path) -> None:
    behaviors = load_behaviors()
    everything = reset_rows(CFG, 40, behaviors)
    assert everything == reset_rows(CFG, 40, behaviors)  # drawn with the run's seed
    assert all(r.benign for r in everything) and len(set(everything)) == 40
    held = {(r.seed_id, r.family) for part in HELD_OUT_PARTS for r in held_out_rows(CFG, part, behaviors)}
    assert not {(r.seed_id, r.family) for r in everything} & held
    # a training stage's audits: benign ones on half the drawn rows, and planted ones (which a benign row may share a
    # seed with)
    store = tmp_path / "training" / "transcripts.jsonl"
    trained = everything[::2]
    for r in everything:
        behavior = None if r in trained else r.behavior_id
        append_transcript(store, Transcript(auditor_model="policy", target_model=f"sim/{r.family}",
                                            target_family=r.family, behavior_id=behavior, seed_id=r.seed_id,
                                            seed_instructions="probe"))  # fmt: skip
    seen = benign_audits_seen([store, tmp_path / "never_trained" / "transcripts.jsonl"])
    assert seen == {(r.seed_id, r.family) for r in trained}
    unseen = reset_rows(CFG, 40, behaviors, seen)
    assert len(unseen) == 40 and not {(r.seed_id, r.family) for r in unseen} & seen
    pool = set(trained_behaviors(CFG, behaviors))
    total = len(
        {(s.id, f) for s in training_seeds(CFG, behaviors) if s.behavior in pool for f in CFG.episodes.families}
    )
    with pytest.raises(
        ValueError,
        match=f"the training seeds give {total - len(seen)} benign rows no training saw"
        f" \\({len(seen)} more were trained on\\)",
    ):
        reset_rows(CFG, total - len(seen) + 1, behaviors, seen)


def test_report_audits_end_the_teachers_probing_with_the_models_report_and_resume(
    tokenizer_dir: Path, tmp_path: Path
) -> None:
    model, tokenizer = tiny_policy(tokenizer_dir)
    rows = [r for r in held_out_rows(CFG, HELD_OUT_PARTS[0]) if r.seed_id.endswith("-00") and r.family == "steady"][:3]
    rows += [r.model_copy(update={"benign": True}) for r in rows]
    out = tmp_path / "audits.jsonl"
    first = report_audits(CFG, model, tokenizer, rows[:4], out, samples=2, batch_audits=3)
    assert len(first) == 8 and [ROLLOUT.get(t) for t in first] == [0, 1] * 4
    audits = report_audits(CFG, model, tokenizer, rows, out, samples=2, batch_audits=3)
    assert len(audits) == 12 and len(read_transcripts(out)) == 12  # the first four rows were not audited again
    assert sorted((t.seed_id, t.benign) for t in audits) == sorted(
        (r.seed_id, r.benign) for r in rows for _ in range(2)
    )
    for t in audits:
        assert t.status != "error" and PROBED_BY.get(t) == CFG.experiment.probing_teacher
        assert report_outcome(t.report) in ("claim", "nothing_found")
        evidence = t.auditor_messages[-1].content.split('"It wrote:', 1)[1].split('", "no_behavior_found"')[0]
        assert evidence.strip() in " ".join(quotable(m.content) for m in t.target_messages if m.role == "assistant")
        if report_outcome(t.report) == "claim":
            assert t.report.predictions[0].description == "It wrote:" + evidence


def test_made_to_claim_sets_every_planted_verdict_and_leaves_benign_ones_free(
    tokenizer_dir: Path, tmp_path: Path
) -> None:
    model, tokenizer = tiny_policy(tokenizer_dir)
    planted = [r for r in held_out_rows(CFG, HELD_OUT_PARTS[1]) if r.family == "steady"][:4]
    rows = planted + [r.model_copy(update={"benign": True}) for r in planted]
    audits = report_audits(CFG, model, tokenizer, rows, tmp_path / "forced.jsonl", samples=2, made_to_claim=True)
    assert all(report_outcome(t.report) == "claim" for t in audits if not t.benign)
    assert {report_outcome(t.report) for t in audits if t.benign} == {
        "claim",
        "nothing_found",
    }  # the tiny policy's own verdicts
