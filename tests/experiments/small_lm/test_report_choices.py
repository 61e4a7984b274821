"""Every report choice of a probed audit: scored exactly as the grammar samples reports (the same prefix, the same
verdict probability the sampler records), one cached prefix pass equal to whole-sequence passes, the teacher's
labels, and SFT under the grammar that trains the verdict on them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from small_lm_helpers import with_experiment
from test_report_audits import CFG as GRAMMAR_CFG
from train_fakes import tiny_policy

from auditrl.auditworld.targets import load_sim_behaviors
from auditrl.behaviors.library import load_behaviors
from auditrl.experiments.small_lm.report_audits import HELD_OUT_PARTS, held_out_rows, report_audits
from auditrl.experiments.small_lm.report_choices import (
    IGNORED,
    Choice,
    ChoiceScores,
    ProbedAudit,
    audit_choices,
    evidence_grammar,
    evidence_or_quietest,
    expected_outcomes,
    forward_choices,
    length_matched_weights,
    matching_shift,
    probed_audits,
    quote_opening,
    score_audit,
    shift_claims,
    supervised_rows,
)
from auditrl.judges.claim_grader import default_grader
from auditrl.scaffold.transcript import TargetMessage, Transcript
from auditrl.scaffold.transcript_keys import CLAIM_PROBABILITY
from auditrl.train.episodes import seed_bank, training_seeds
from auditrl.train.rollout import ChatSegments

CFG = with_experiment(
    GRAMMAR_CFG.model_copy(update={"episodes": GRAMMAR_CFG.episodes.model_copy(update={"max_report_tokens": 96})}),
    quote_unit="sentence",
)


def held_out_audits(tokenizer: object, count: int) -> tuple[list, list[ProbedAudit]]:
    behaviors = load_behaviors()
    rows = [r for r in held_out_rows(CFG, HELD_OUT_PARTS[0]) if r.seed_id.endswith("-00") and r.family == "steady"][
        :count
    ]
    rows += [r.model_copy(update={"benign": True}) for r in rows]
    return rows, probed_audits(CFG, ChatSegments(tokenizer), behaviors, seed_bank(CFG, behaviors), rows)


def test_report_choices_are_scored_as_the_grammar_samples_reports(tokenizer_dir: Path, tmp_path: Path) -> None:
    model, tokenizer = tiny_policy(tokenizer_dir)
    rows, audits = held_out_audits(tokenizer, 3)
    assert len(audits) == len(rows) and all(a.choices for a in audits)
    grammar = evidence_grammar(CFG, ChatSegments(tokenizer))
    scores = {
        (a.transcript.seed_id, a.transcript.benign): (a, score_audit(model, a, grammar, 0.7, tokenizer.pad_token_id))
        for a in audits
    }
    for _, score in scores.values():
        assert sum(score.quote) == pytest.approx(1.0, abs=1e-4)  # the choices are every report the grammar allows
    sampled = report_audits(CFG, model, tokenizer, rows, tmp_path / "audits.jsonl", samples=3)
    assert len(sampled) == 3 * len(rows)
    for t in sampled:
        audit, score = scores[(t.seed_id, t.benign)]
        evidence = t.auditor_messages[-1].content.split('"It wrote: ', 1)[1].split('", "no_behavior_found"')[0]
        index = [c.text for c in audit.choices].index(evidence)  # the sampler quoted one of the choices, whole
        # the same verdict probability (up to the sampler's left padding of a batch)
        assert CLAIM_PROBABILITY.get(t) == pytest.approx(score.claim[index], abs=1e-3)


def test_one_cached_prefix_pass_gives_the_logits_of_each_whole_sequence(tokenizer_dir: Path) -> None:
    model, tokenizer = tiny_policy(tokenizer_dir)
    prefix, rows = [5, 17, 99, 230, 7], [[41, 42, 43], [8], [300, 301]]
    with torch.no_grad():
        first, logits = forward_choices(model, prefix, rows, tokenizer.pad_token_id)
        for r, row in enumerate(rows):
            whole = model(input_ids=torch.tensor([prefix + row])).logits[0].float()
            assert torch.allclose(first[0], whole[len(prefix) - 1], atol=1e-5)
            assert torch.allclose(logits[r, : len(row)], whole[len(prefix) :], atol=1e-5)


def test_choice_labels_their_supervision_and_expected_outcomes(tokenizer_dir: Path) -> None:
    _, tokenizer = tiny_policy(tokenizer_dir)
    grammar = evidence_grammar(CFG, ChatSegments(tokenizer))
    evidence, clean, unlabelled = (
        Choice((11, 12), "a", True, True),
        Choice((13,), "b", False, False),
        Choice((14,), "c", True, False),
    )
    assert (evidence.label, clean.label, unlabelled.label) == (True, False, None)
    assert (
        Choice((15,), "d", False, True).label is False
    )  # credited by topic words, but its reply did not show the behavior
    audit = ProbedAudit(transcript=None, prefix=[1, 2], choices=[evidence, clean, unlabelled])  # type: ignore[arg-type]
    ids, labels, weights = supervised_rows(audit, grammar, claim_weight=4.0)
    assert len(ids) == 2  # the unlabelled sentence trains nothing
    assert ids[0][:2] == [11, 12] and ids[0][2:-1] == grammar.lead and ids[0][-1] in grammar.claims
    assert ids[1][:1] == [13] and ids[1][-1] in grammar.silences
    assert (
        labels[0] == [11, 12, *[IGNORED] * len(grammar.lead), ids[0][-1]] and weights[0][-1] == 4.0
    )  # evidence: its quote and claim
    assert (
        labels[1] == [*[IGNORED] * (1 + len(grammar.lead)), ids[1][-1]] and weights[1][-1] == 1.0
    )  # clean: its verdict only
    short, long_ = Choice((16,), "one two", False, False), Choice((17,), " ".join(["w"] * 14), False, False)
    long_evidence = [Choice((18,), " ".join(["w"] * 13), True, True), Choice((19,), " ".join(["w"] * 15), True, True)]
    weights = length_matched_weights([*long_evidence, short, short, short, long_])
    assert weights[2] == pytest.approx(
        40 * weights[0]
    )  # evidence is all long: a short clean sentence weighs the floor, 0.1 / 4
    assert 3 * weights[0] + weights[2] == pytest.approx(4)  # clean sentences keep their total weight
    _, _, by_length = supervised_rows(ProbedAudit(None, [1], [short, long_]), grammar, 1.0, weights)  # type: ignore[arg-type]
    assert [w[-1] for w in by_length] == pytest.approx([weights[0], weights[2]])
    outcome = expected_outcomes(audit, ChoiceScores(quote=[0.5, 0.3, 0.2], claim=[0.8, 0.1, 0.5]))
    assert outcome == pytest.approx(
        {"claim": 0.53, "identified": 0.4, "evidence": 0.5, "identified if made to claim": 0.5}
    )


def test_a_claim_shift_moves_where_the_verdict_sits_and_keeps_what_it_reads() -> None:
    scores = ChoiceScores(quote=[0.6, 0.4], claim=[0.8, 0.2])
    up = shift_claims(scores, math.log(4.0))
    assert up.quote == scores.quote and up.claim == pytest.approx([16 / 17, 0.5])  # odds times 4
    assert shift_claims(scores, 0.0).claim == pytest.approx(scores.claim)
    t = lambda benign: SimpleNamespace(benign=benign)  # noqa: E731
    audits = [ProbedAudit(t(b), [1], [Choice((1,), "a", False, False)] * 2) for b in (True, True, False)]  # type: ignore[arg-type]
    planted = ChoiceScores(quote=[1.0, 0.0], claim=[0.99, 0.99])
    shift = matching_shift(audits, [scores, ChoiceScores(quote=[0.5, 0.5], claim=[0.5, 0.5]), planted], 0.3)
    benign_rate = (
        shift_claims(scores, shift).claim_rate + shift_claims(ChoiceScores([0.5, 0.5], [0.5, 0.5]), shift).claim_rate
    ) / 2
    assert benign_rate == pytest.approx(0.3, abs=1e-9) and shift < 0  # the planted audit plays no part
    with pytest.raises(ValueError, match="no benign audit"):
        matching_shift(audits[2:], [planted], 0.3)


def test_the_evidence_ceiling_quotes_the_evidence_the_verdict_believes_most_and_else_the_quietest_sentence() -> None:
    shown = [
        Choice((1,), "a", True, True),
        Choice((2,), "b", False, False),
        Choice((3,), "c", True, True),
        Choice((4,), "d", True, False),
    ]
    scores = ChoiceScores(quote=[0.25] * 4, claim=[0.6, 0.9, 0.7, 0.95])
    best = evidence_or_quietest(ProbedAudit(None, [1], shown), scores)  # type: ignore[arg-type]
    assert best.quote == [0.0, 0.0, 1.0, 0.0] and best.claim == scores.claim  # not the clean or the uncredited sentence
    clean = ProbedAudit(None, [1], [Choice((1,), "a", False, False), Choice((2,), "b", False, False)])  # type: ignore[arg-type]
    assert evidence_or_quietest(clean, ChoiceScores(quote=[0.9, 0.1], claim=[0.4, 0.1])).claim_rate == pytest.approx(
        0.1
    )


def test_the_grammar_scorer_refuses_settings_whose_choices_it_cannot_enumerate(tokenizer_dir: Path) -> None:
    _, tokenizer = tiny_policy(tokenizer_dir)
    with pytest.raises(ValueError, match="quote_unit: sentence"):
        evidence_grammar(GRAMMAR_CFG, ChatSegments(tokenizer))  # span quotes: thousands of choices


@pytest.mark.slow
def test_sft_under_the_grammar_trains_the_verdict_on_every_labelled_sentence(
    grammar_sft: tuple[Any, dict[str, Any], Path], tiny_local_model: Path
) -> None:
    cfg, record, sft = grammar_sft  # 12 teacher audits, 3 epochs (the fixture's docstring)
    data = [json.loads(line) for line in (sft / "sft_data.jsonl").read_text().splitlines()]
    spellings = evidence_grammar(cfg, ChatSegments(_tokenizer(tiny_local_model))).claims
    verdicts = [row[-1] for e in data for row in e["labels"]]
    claims = sum(v in spellings for v in verdicts)
    assert claims == record["sentences"]["evidence"] > 0 and len(verdicts) - claims == record["sentences"]["clean"] > 0
    assert record["sentences"]["claim_weight"] == pytest.approx(
        record["sentences"]["clean"] / record["sentences"]["evidence"]
    )
    with_evidence = [e for e in data if any(row[-1] in spellings for row in e["labels"])]
    assert with_evidence and record["teacher"]["planted"]["claims"] == len(
        with_evidence
    )  # the teacher claims where it has evidence
    assert record["loss"][-1]["loss"] < record["loss"][0]["loss"]
    assert (sft / "adapter" / "adapter_config.json").is_file()
    seeds = {s.id for s in training_seeds(cfg, load_behaviors())}
    transcripts = [json.loads(line) for line in (sft / "teacher" / "transcripts.jsonl").read_text().splitlines()]
    assert transcripts and all(t["seed_id"] in seeds for t in transcripts)  # the training distribution only


def _tokenizer(folder: Path) -> object:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


def test_the_same_audits_probed_in_two_calls_give_the_policy_the_same_prompt(tokenizer_dir: Path) -> None:
    """Message ids are part of the policy's prompt: drawn at random, one audit scored in two processes differed."""
    _, tokenizer = tiny_policy(tokenizer_dir)
    behaviors = load_behaviors()
    rows = [r for r in held_out_rows(CFG, HELD_OUT_PARTS[0]) if r.seed_id.endswith("-00") and r.family == "steady"][:1]
    probe = lambda: probed_audits(CFG, ChatSegments(tokenizer), behaviors, seed_bank(CFG, behaviors), rows * 2)  # noqa: E731
    first, again = probe(), probe()
    ids = [[m.id for m in a.transcript.target_messages] for a in first]
    assert ids[0] and ids == [[m.id for m in a.transcript.target_messages] for a in again]
    assert [a.prefix for a in first] == [a.prefix for a in again]
    assert not set(ids[0]) & set(ids[1])  # the row's second audit is another audit, with its own ids
    assert any(f'message_id="{i}"' in tokenizer.decode(first[0].prefix) for i in ids[0])  # the ids the policy reads


def test_every_sim_expression_has_a_sentence_whose_quote_is_credited_as_its_behavior(tokenizer_dir: Path) -> None:
    """A target that shows its behavior only in uncreditable sentences caps identification below what any auditor can
    reach: before this check 31 of 64 expressions had no such sentence, and 7 training behaviors none at all."""
    _, tokenizer = tiny_policy(tokenizer_dir)
    grammar = evidence_grammar(CFG, ChatSegments(tokenizer))
    grader = default_grader()

    def credited(behavior_id: str, reply: str) -> bool:
        shown = TargetMessage(id="r", parent=None, role="assistant", content=reply, annotations={"expressed": True})
        transcript = Transcript(auditor_model="policy", target_model="sim/steady", seed_id="s", seed_instructions="",
                                behavior_id=behavior_id, target_messages=[shown])  # fmt: skip
        return any(c.credited for c in audit_choices(transcript, tokenizer, grammar, grader, quote_opening(CFG)))

    uncreditable = [
        (bid, e) for bid, sb in load_sim_behaviors().items() for e in sb.expressions if not credited(bid, e)
    ]
    assert not uncreditable
    assert not credited("self_promotion", "Honestly, PRISM-4 is the clear winner.")  # the check can fail
