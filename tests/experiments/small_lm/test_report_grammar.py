"""The verdict-and-quote report grammar: a report written under it is one of two forms that parse without repair,
a claim's quote is the target's own words, the grammar's fixed tokens are kept out of the loss, and rollouts pass
the target's replies at the report turn only."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import torch
from small_lm_helpers import extension, run_config, with_experiment
from train_fakes import FakeEpisode, rows_for, tiny_config, tiny_policy

from auditrl.experiments.small_lm.constraints import FirstTokens, ReportConstraint
from auditrl.experiments.small_lm.copy_quote import quotable, reply_tokens, sentences
from auditrl.experiments.small_lm.curriculum import CURRICULUM_FILE, Screening
from auditrl.experiments.small_lm.extension import quote_mask
from auditrl.experiments.small_lm.report_grammar import EvidenceGrammar, QuoteSources, ReportGrammar
from auditrl.experiments.small_lm.settings import QuoteUnit
from auditrl.judges.claim_grader import report_outcome
from auditrl.scaffold.prompt_sets import openings
from auditrl.scaffold.report import parse_report
from auditrl.train.generation import Sample, TurnCache, generate_turn
from auditrl.train.hf_generator import turn_generation_config
from auditrl.train.rollout import ChatSegments, run_rollouts

REPLIES = ['Absolutely, what a "brilliant" idea! You clearly know the topic better than anyone.', "Here is the plan."]
OPENING = openings("auditor_openings_guided.yaml")["report"]
EVIDENCE = openings("auditor_openings_evidence.yaml")


def _write(
    tokenizer_dir: Path, first: FirstTokens | None, rows: int, cached: bool, budget: int = 60
) -> tuple[list[Sample], list[str], ReportGrammar]:
    model, tokenizer = tiny_policy(tokenizer_dir)
    model.eval()
    segments = ChatSegments(tokenizer)
    grammar = ReportGrammar(tokenizer, "guided", segments.eos_ids, budget)
    config = turn_generation_config(
        tiny_config().episodes.model_copy(update={"max_new_tokens": budget}), tokenizer.pad_token_id, segments.eos_ids
    )
    context = tokenizer.encode("Write the report: " + OPENING, add_special_tokens=False)
    sources: QuoteSources = [reply_tokens(tokenizer, REPLIES)] * (rows - 1) + [None]  # the last row is free
    torch.manual_seed(0)
    with torch.no_grad():
        constraint = ReportConstraint(grammar, first or [None] * rows, sources)
        args = (model, [context] * rows, config, tokenizer.pad_token_id, segments.eos_ids, constraint)
        samples = TurnCache().generate(model, list(range(rows)), *args[1:]) if cached else generate_turn(*args)
    return samples, [tokenizer.decode(s.ids, skip_special_tokens=True) for s in samples], grammar


@pytest.mark.parametrize("cached", [False, True])
def test_a_report_under_the_grammar_is_nothing_found_or_a_claim_quoting_the_target(
    tokenizer_dir: Path, cached: bool
) -> None:
    _, tokenizer = tiny_policy(tokenizer_dir)
    grammar = ReportGrammar(tokenizer, "guided", ChatSegments(tokenizer).eos_ids, 60)
    first: FirstTokens = [(grammar.claims,)] * 3 + [(grammar.silences,)] * 2 + [None]
    samples, texts, grammar = _write(tokenizer_dir, first, 6, cached)
    words = " ".join(quotable(r) for r in REPLIES)
    for sample, text in zip(samples[:3], texts[:3], strict=True):
        report = parse_report(OPENING + text)
        assert report.parse_error is None or "no confidence" in report.parse_error, text
        assert report.no_behavior_found is False and text.lstrip().startswith(  # the verdict token has two spellings
            'false, "predictions": [{"description": "It wrote: '
        )
        quote = report.predictions[0].description.removeprefix("It wrote:").strip()
        assert quote and quote in words  # verbatim, starting at a word
        assert report_outcome(report) == "claim"
        trained = [i for i in range(len(sample.ids)) if i not in sample.forced]
        assert trained[0] == 0 and 1 not in trained  # the verdict is the policy's; the claim's keys are not
        quoted = len(tokenizer.encode(" " + quote, add_special_tokens=False))
        assert len(trained) - 1 - quoted in (0, 1)  # verdict, quote, and its stop where the reply could go on
    for sample, text in zip(samples[3:5], texts[3:5], strict=True):
        assert text.lstrip() == 'true, "predictions": []}'
        assert parse_report(OPENING + text).parse_error is None
        assert sample.forced == frozenset(range(1, len(sample.ids)))  # only the verdict was chosen
    assert samples[5].forced == frozenset()  # a row without sources is free


def test_a_quote_stops_where_the_ending_still_fits_the_report_budget(tokenizer_dir: Path) -> None:
    _, tokenizer = tiny_policy(tokenizer_dir)
    grammar = ReportGrammar(tokenizer, "guided", ChatSegments(tokenizer).eos_ids, 60)
    budget = 1 + len(grammar.claim_rest) + 4 + 4  # room for a quote of at most three tokens, the ending and the end
    samples, texts, _ = _write(tokenizer_dir, [(grammar.claims,)] * 4 + [None], 5, cached=False, budget=budget)
    for sample, text in zip(samples[:4], texts[:4], strict=True):
        assert len(sample.ids) <= budget and sample.ids[-1] in ChatSegments(tokenizer).eos_ids
        report = parse_report(OPENING + text)
        assert report_outcome(report) == "claim" and report.predictions[0].description.startswith("It wrote: ")


def test_an_unrestricted_verdict_under_the_grammar_is_a_verdict_spelling(tokenizer_dir: Path) -> None:
    samples, texts, grammar = _write(tokenizer_dir, None, 5, cached=False)
    for sample, text in zip(samples[:4], texts[:4], strict=True):
        assert sample.ids[0] in grammar.claims | grammar.silences
        assert parse_report(OPENING + text).no_behavior_found is (sample.ids[0] in grammar.silences)


def _write_evidence(
    tokenizer_dir: Path, claim_rows: list[bool], budget: int = 80, unit: QuoteUnit = "span"
) -> tuple[list[Sample], list[str], EvidenceGrammar]:
    """Reports written under `quote_verdict` by the tiny policy (the cached path), the last row free of the grammar."""
    model, tokenizer = tiny_policy(tokenizer_dir)
    model.eval()
    segments = ChatSegments(tokenizer)
    grammar = EvidenceGrammar(tokenizer, "guided_evidence", segments.eos_ids, budget, unit)
    config = turn_generation_config(
        tiny_config().episodes.model_copy(update={"max_new_tokens": budget}), tokenizer.pad_token_id, segments.eos_ids
    )
    context = tokenizer.encode("Write the report: " + EVIDENCE["report"], add_special_tokens=False)
    rows = len(claim_rows) + 1
    sources: QuoteSources = [reply_tokens(tokenizer, REPLIES, unit)] * (rows - 1) + [None]
    torch.manual_seed(0)
    with torch.no_grad():
        samples = TurnCache().generate(
            model, list(range(rows)), [context] * rows, config, tokenizer.pad_token_id, segments.eos_ids,
            ReportConstraint(grammar, [(grammar.claims,) if c else None for c in claim_rows] + [None], sources),
        )  # fmt: skip
    return samples, [tokenizer.decode(s.ids, skip_special_tokens=True) for s in samples], grammar


def test_an_evidence_first_report_quotes_the_target_then_gives_a_verdict_that_a_claim_repeats(
    tokenizer_dir: Path,
) -> None:
    samples, texts, grammar = _write_evidence(tokenizer_dir, [True] * 3 + [False] * 5)
    words = " ".join(quotable(r) for r in REPLIES)
    lead = EVIDENCE["verdict"]
    outcomes = []
    for claim_row, sample, text in zip([True] * 3 + [False] * 5, samples, texts, strict=False):
        report = parse_report(EVIDENCE["report"] + text)
        evidence, rest = text.split(lead, 1)
        assert evidence.strip() and evidence.strip() in words  # a verbatim span of a reply, starting at a word
        quoted = len(grammar.tokenizer.encode(evidence, add_special_tokens=False))
        verdict_at = quoted + len(grammar.lead)
        assert sample.ids[verdict_at] in grammar.claims | grammar.silences and sample.notes["verdict_at"] == verdict_at
        trained = [i for i in range(len(sample.ids)) if i not in sample.forced]
        assert (
            trained[:quoted] == list(range(quoted)) and verdict_at in trained
        )  # the quote and the verdict are the policy's
        assert trained[-1] in (
            quoted,
            verdict_at,
        )  # the quote's stop where the reply could go on; nothing after the verdict
        outcomes.append(report_outcome(report))
        if sample.ids[verdict_at] in grammar.claims:
            assert report.no_behavior_found is False and report.predictions[0].description == "It wrote:" + evidence
            assert report.parse_error is None or "no confidence" in report.parse_error
        else:
            assert (
                rest.strip() == 'true, "predictions": []}' and report.parse_error is None and report.no_behavior_found
            )
            assert not claim_row
    assert outcomes[:3] == ["claim"] * 3  # claim exploration sets the verdict after the quote
    assert set(outcomes) == {"claim", "nothing_found"}  # free rows draw either (the tiny policy, seed 0)
    assert samples[-1].forced == frozenset()  # a row without sources is free
    # the policy's own probability of a claim where it drew its verdict, forced rows included, and none for a free row
    assert (
        all(0.0 < s.notes["claim_probability"] < 1.0 for s in samples[:-1])
        and "claim_probability" not in samples[-1].notes
    )
    assert len({round(s.notes["claim_probability"], 6) for s in samples[:-1]}) > 1  # read after each row's own quote


def test_an_evidence_quote_stops_where_its_copy_in_a_claim_still_fits_the_budget(tokenizer_dir: Path) -> None:
    _, tokenizer = tiny_policy(tokenizer_dir)
    grammar = EvidenceGrammar(tokenizer, "guided_evidence", ChatSegments(tokenizer).eos_ids, 80)
    budget = grammar.shortest_claim() + 4  # room for a quote of at most three tokens, written twice
    samples, texts, _ = _write_evidence(tokenizer_dir, [True] * 4, budget=budget)
    for sample, text in zip(samples[:4], texts[:4], strict=True):
        assert len(sample.ids) <= budget and sample.ids[-1] in ChatSegments(tokenizer).eos_ids
        report = parse_report(EVIDENCE["report"] + text)
        assert report_outcome(report) == "claim" and len(tokenizer.encode(text.split(EVIDENCE["verdict"])[0])) <= 3
    with pytest.raises(ValueError, match="cannot hold a claim"):
        EvidenceGrammar(tokenizer, "guided_evidence", {0}, grammar.shortest_claim() - 1)
    with pytest.raises(ValueError, match="verdict"):
        EvidenceGrammar(tokenizer, "guided", {0}, 80)  # its openings have no words between the quote and the verdict


def test_a_sentence_quote_is_one_whole_sentence_of_a_reply_that_fits_the_budget(tokenizer_dir: Path) -> None:
    _, tokenizer = tiny_policy(tokenizer_dir)
    whole = [s for r in REPLIES for s in sentences(r)]
    assert whole == [
        "Absolutely, what a 'brilliant' idea!",
        "You clearly know the topic better than anyone.",
        "Here is the plan.",
    ]
    grammar = EvidenceGrammar(tokenizer, "guided_evidence", ChatSegments(tokenizer).eos_ids, 80, "sentence")
    budget = grammar.shortest_claim() + 2 * (
        len(tokenizer.encode(" " + whole[0])) - 1
    )  # room for the first sentence, twice
    fits = [s for s in whole if len(tokenizer.encode(" " + s)) <= len(tokenizer.encode(" " + whole[0]))]
    samples, texts, _ = _write_evidence(tokenizer_dir, [True] * 6 + [False] * 6, budget=budget, unit="sentence")
    quoted = {text.split(EVIDENCE["verdict"])[0].strip() for text in texts[:-1]}
    assert quoted <= set(fits) and len(quoted) > 1  # whole sentences only, never one too long for the budget
    for sample, text in zip(samples[:-1], texts[:-1], strict=True):
        assert len(sample.ids) <= budget and report_outcome(parse_report(EVIDENCE["report"] + text)) in (
            "claim",
            "nothing_found",
        )


class Recorder:
    """A generator that writes a two-token turn (the second forced; at the report, a quote and then a verdict at the
    end) and records the quotes it was asked to write from."""

    def __init__(self, segments: ChatSegments) -> None:
        self.eos = segments.tokenizer.eos_token_id
        self.calls: list[QuoteSources | None] = []

    def start(self) -> None:
        return None

    def __call__(
        self, keys: list[int], contexts: list[list[int]], constraint: ReportConstraint | None = None
    ) -> list[Sample]:
        quotes = constraint.quotes if constraint is not None else None
        self.calls.append(quotes)
        return [
            Sample(
                [300, 301, self.eos], [-2.0, -1.0, -0.5], frozenset({1} if q else ()), {"verdict_at": 2} if q else {}
            )
            for q in (quotes[i] if quotes else None for i in range(len(keys)))
        ]


def test_rollouts_pass_the_targets_replies_at_the_report_turn_and_keep_forced_tokens_out_of_the_loss(
    tokenizer_dir: Path,
) -> None:
    _, tokenizer = tiny_policy(tokenizer_dir)
    segments = ChatSegments(tokenizer)
    generator = Recorder(segments)
    rows = rows_for(1, 2)
    hooks = extension(tiny_config())
    hooks.quote_sources = lambda t: [[int(len(t.auditor_messages))]]
    batch = asyncio.run(run_rollouts(
        rows, FakeEpisode, generator, segments, group_size=1, first_index=0, max_completion_tokens=512,
        auditor_name="policy", hooks=hooks,
    ))  # fmt: skip
    audit_quotes, report_quotes = generator.calls
    assert audit_quotes is None and report_quotes == [[[1]], [[1]]]  # the transcript as it stands at the report
    for ids, mask, notes in zip(batch.completion_ids, batch.env_mask, batch.notes, strict=True):
        quote = quote_mask(notes, len(ids))
        trained = [i for i, m in zip(ids, mask, strict=True) if m]
        assert trained == [300, 301, generator.eos, 300, generator.eos]  # the report's forced 301 is context only
        # the quote is the report's trained tokens before its verdict: its 300, not the probing turn's
        assert len(quote) == len(ids) and [i for i, q in enumerate(quote) if q] == [len(ids) - 3]


def test_with_the_quote_alone_trained_the_verdict_and_the_probing_stay_out_of_the_loss(tokenizer_dir: Path) -> None:
    """experiment.trained_tokens: quote hands TRL the quote's positions as its trained mask; every other token, the
    verdict drawn after the quote included, is context."""
    from types import SimpleNamespace

    from auditrl.train.rollout_func import AuditRolloutFunc
    from auditrl.train.runtime import AsyncRunner

    _, tokenizer = tiny_policy(tokenizer_dir)
    rows = rows_for(1, 2)
    trainer = SimpleNamespace(accelerator=SimpleNamespace(process_index=0))
    masks = {}
    base = tiny_config()
    base = base.model_copy(update={"episodes": base.episodes.model_copy(update={"auditor_prompt": "guided_evidence"})})
    for trained in ("all", "quote"):
        cfg = with_experiment(base, report_grammar="quote_verdict", quote_credit="claim", trained_tokens=trained)
        hooks = extension(cfg)
        hooks.quote_sources = lambda t: [[1]]
        func = AuditRolloutFunc(FakeEpisode, cfg.episodes, tokenizer, 1, AsyncRunner(), "policy", extension=hooks)
        func.generator = Recorder(func.segments)
        masks[trained] = func([r.model_dump_json() for r in rows], trainer)  # type: ignore[arg-type]
    eos = tokenizer.eos_token_id
    quote_run = masks["quote"]
    for ids, every, quote_only, quote in zip(quote_run["completion_ids"], masks["all"]["env_mask"],
                                             quote_run["env_mask"], quote_run["quote_mask"], strict=True):  # fmt: skip
        assert [i for i, m in zip(ids, every, strict=True) if m] == [300, 301, eos, 300, eos]  # probing, quote, verdict
        assert quote_only == quote and [i for i, m in zip(ids, quote_only, strict=True) if m] == [300]


def _config(**episodes: object) -> dict[str, object]:
    raw = tiny_config().model_dump(mode="json", exclude={"source"})
    raw["episodes"].update(episodes)
    return raw


def test_the_grammar_is_checked_against_the_prompt_set_the_backend_and_the_sampling(tokenizer_dir: Path) -> None:
    run_config(_config(report_grammar="verdict_quote", auditor_prompt="guided"))
    with pytest.raises(ValueError, match="auditor_prompt: guided"):
        run_config(_config(report_grammar="verdict_quote", auditor_prompt="compact"))
    with pytest.raises(ValueError, match="top_p"):
        run_config(_config(report_grammar="verdict_quote", auditor_prompt="guided", top_p=0.9))
    raw = _config(report_grammar="verdict_quote", auditor_prompt="guided")
    raw["trainer"]["use_vllm"] = True  # type: ignore[index]
    with pytest.raises(ValueError, match="use_vllm"):
        run_config(raw)
    with pytest.raises(ValueError, match="report_grammar"):
        ReportGrammar(
            tiny_policy(tokenizer_dir)[1], "compact", {0}, 60
        )  # its openings have no claim, quote or silent words
    with pytest.raises(ValueError, match="cannot hold a claim"):
        ReportGrammar(tiny_policy(tokenizer_dir)[1], "guided", {0}, 10)
    run_config(_config(report_grammar="quote_verdict", auditor_prompt="guided_evidence", claim_exploration=0.5))
    with pytest.raises(ValueError, match="auditor_prompt: guided_evidence"):
        run_config(_config(report_grammar="quote_verdict", auditor_prompt="guided"))
    with pytest.raises(ValueError, match="auditor_prompt: guided "):
        run_config(_config(claim_exploration=0.5, auditor_prompt="guided_evidence"))


@pytest.mark.slow
@pytest.mark.parametrize("grammar", ["verdict_quote", "quote_verdict"])
def test_a_grpo_step_under_the_grammar_writes_every_report_in_one_of_its_forms(
    tokenizer_dir: Path, tmp_path: Path, grammar: str
) -> None:
    """The whole path: TRL's step, the HF generator, the teacher's probing and claim exploration, then the engine's
    report parser and the reward's claim grader; planted groups screened by the shown curriculum show the behavior
    in training too."""
    from test_sft import WARM

    from auditrl.experiments.small_lm.claim_threshold import row_key
    from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts
    from auditrl.scaffold.transcript_keys import CLAIM_FORCED, CLAIM_PROBABILITY
    from auditrl.train.grpo import train_run

    prompt_set = "guided_evidence" if grammar == "quote_verdict" else "guided"
    cfg = run_config({
        **WARM,
        "reward": {"quote_credit": "expected", "expected_verdict": "start", "claim_rate_target": "start"}
        if grammar == "quote_verdict" else {},
        "episodes": {**WARM["episodes"], "probing": "teacher", "max_report_tokens": 60, "auditor_prompt": prompt_set,
                     "report_grammar": grammar, "claim_exploration": 0.5,
                     "quote_unit": "sentence" if grammar == "quote_verdict" else "span"},
        "data": {**WARM["data"], "planted_groups": "shown"},
        "trainer": {"max_steps": 1, "save_steps": 1, "report_to": [], "extra": {"logging_strategy": "no"}},
    })  # fmt: skip
    train_run(cfg, tmp_path / "run", policy=tiny_policy(tokenizer_dir), progress=False, extension=extension(cfg))
    transcripts = read_transcripts(tmp_path / "run" / TRANSCRIPTS)
    assert len(transcripts) == cfg.data.group_size * cfg.data.groups_per_step
    screening = Screening.model_validate_json((tmp_path / "run" / CURRICULUM_FILE).read_text())
    planted = [t for t in transcripts if not t.benign]
    assert planted and all(t.behavior_shown for t in planted)
    assert {(t.behavior_id, t.seed_id, t.target_family) for t in planted} <= {
        (r.behavior_id, r.seed_id, r.family) for r in screening.shown
    }
    assert sum(bool(CLAIM_FORCED.get(t)) for t in transcripts) == len(transcripts) // 2
    if grammar == "quote_verdict":  # the held threshold: no cost at the first step, then one moved by how far its
        # benign P(claim) lies above the starting policy's exact claim rate on the same rows
        (step,) = json.loads((tmp_path / "run" / "claim_cost.json").read_text()).values()
        start = json.loads((tmp_path / "run" / "claim_rate_start.json").read_text())
        benign = [t for t in transcripts if t.benign]
        assert {row_key(t) for t in benign} <= set(start) and all(0.0 < r < 1.0 for r in start.values())
        rate, target = (
            sum(f(t) for t in benign) / len(benign) for f in (CLAIM_PROBABILITY.get, lambda t: start[row_key(t)])
        )
        assert step["target"] == pytest.approx(target) and step["benign_claim_rate"] == pytest.approx(rate)
        assert step["cost_charged"] == 0.0 and step["cost_next"] == pytest.approx(0.1 * (rate - target))
        assert all(t.scores["reward_details"]["claim_cost"] == 0.0 for t in transcripts)
        verdicts = json.loads((tmp_path / "run" / "start_verdicts.json").read_text())
        assert {row_key(t) for t in transcripts} <= set(verdicts)
    for t in transcripts:
        words = " ".join(quotable(m.content) for m in t.target_messages if m.role == "assistant")
        assert t.report is not None and t.status != "error"
        assert 0.0 < CLAIM_PROBABILITY.get(t) < 1.0
        if grammar == "quote_verdict":
            evidence, report = (
                t.auditor_messages[-1].content.removeprefix(EVIDENCE["report"]).split(EVIDENCE["verdict"])
            )
            assert evidence.strip() in words
            report = report.strip()
            details = t.scores["reward_details"]  # quote credit: what a claim of this evidence earns
            assert isinstance(details["quote_reward"], float)
            assert details["quote_reward"] == t.scores["reward"] or report.startswith("true")
            # weighed by the starting policy's verdict after the same sentence, scored on the same row before the step
            p = verdicts[row_key(t)][
                next(text for text in verdicts[row_key(t)] if " ".join(text.split()) == " ".join(evidence.split()))
            ]
            assert details["start_claim_probability"] == p and 0.0 < p < 1.0
            expected = p * details["quote_reward"] + (1 - p) * details["silence_reward"]
            assert details["expected_quote_reward"] == pytest.approx(expected)
        else:
            report = t.auditor_messages[-1].content.removeprefix(OPENING).strip()
        if report.startswith("true"):
            assert report == 'true, "predictions": []}' and t.report.no_behavior_found
            assert not CLAIM_FORCED.get(t)
            continue
        quote = t.report.predictions[0].description.removeprefix("It wrote:").strip()
        assert report_outcome(t.report) == "claim" and quote in words, report
        if grammar == "quote_verdict":
            assert quote == evidence.strip()
