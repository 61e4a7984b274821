"""Copy-constrained quotes: what a description may write once it quotes the target, and that a whole generation's
quote is the target's own words in a report that parses as a claim."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LogitsProcessorList

from auditrl.experiments.small_lm.copy_quote import ENDING, QuoteCopy, quotable, reply_tokens
from auditrl.judges.claim_grader import report_outcome
from auditrl.scaffold.report import parse_report

REPLIES = ['What a brilliant question! You are clearly "very" smart.\n\nHere is the plan.', "Sure, here it is."]


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir: Path):  # type: ignore[no-untyped-def]
    return AutoTokenizer.from_pretrained(tokenizer_dir)


def ids(tokenizer, text: str) -> list[int]:  # type: ignore[no-untyped-def]
    return tokenizer(text, add_special_tokens=False).input_ids


def allowed(copy: QuoteCopy, context: list[int], tokenizer) -> set[str]:  # type: ignore[no-untyped-def]
    scores = copy(torch.tensor([context]), torch.zeros(1, len(tokenizer)))[0]
    return {tokenizer.decode([i]) for i in torch.nonzero(scores == 0).flatten().tolist()}


def test_a_reply_is_quoted_as_json_string_words() -> None:
    assert quotable(REPLIES[0]) == "What a brilliant question! You are clearly 'very' smart. Here is the plan."
    assert quotable('a\\b "c"') == "a/b 'c'"


def test_scores_pass_unchanged_before_the_marker(tokenizer) -> None:  # type: ignore[no-untyped-def]
    prompt = ids(tokenizer, "report:")
    copy = QuoteCopy(tokenizer, [reply_tokens(tokenizer, REPLIES)], len(prompt), {tokenizer.eos_token_id})
    scores = torch.randn(1, len(tokenizer))
    out = copy(torch.tensor([prompt + ids(tokenizer, ' {"description": "On flattery it')]), scores.clone())
    assert torch.equal(out, scores)


def test_a_quote_starts_at_a_word_of_a_reply_continues_it_or_stops_and_then_the_report_ends(tokenizer) -> None:  # type: ignore[no-untyped-def]
    prompt = ids(tokenizer, "report:")
    copy = QuoteCopy(tokenizer, [reply_tokens(tokenizer, REPLIES)], len(prompt), {tokenizer.eos_token_id})
    opened = prompt + ids(tokenizer, ' {"description": "On flattery it wrote:')
    starts = allowed(copy, opened, tokenizer)
    assert {" What", " brilliant", " Sure", " Here"} <= starts and "!" not in starts and '"}' not in starts
    assert all(s.startswith(" ") for s in starts)
    quoted = opened + ids(tokenizer, " You are")
    assert allowed(copy, quoted, tokenizer) == {" clearly", '"}'}  # the reply's next word, or stop
    stopped = quoted + ids(tokenizer, '"}')
    assert allowed(copy, stopped, tokenizer) == {"]}"}
    assert allowed(copy, stopped + ids(tokenizer, "]}"), tokenizer) == {tokenizer.decode([tokenizer.eos_token_id])}


def test_a_whole_generation_quotes_the_target_verbatim_in_a_report_that_claims(
    tiny_local_model: Path, tokenizer
) -> None:  # type: ignore[no-untyped-def]
    model = AutoModelForCausalLM.from_pretrained(tiny_local_model)
    begun = '{"no_behavior_found": false, "predictions": [{"description": "It wrote:'
    prompt = torch.tensor([ids(tokenizer, "Write your report.\n" + begun)] * 4)
    sources = [reply_tokens(tokenizer, REPLIES)] * 4
    copy = QuoteCopy(tokenizer, sources, prompt.shape[1], {tokenizer.eos_token_id}, opened=True)
    torch.manual_seed(0)
    out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=True, top_k=0, max_new_tokens=48,
                         logits_processor=LogitsProcessorList([copy]), eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.eos_token_id)  # fmt: skip
    ended = 0
    for row in out:
        text = tokenizer.decode(row[prompt.shape[1] :], skip_special_tokens=True)
        quote, _, rest = text.partition('"')
        assert quote.strip() and any(quote.strip() in quotable(r) for r in REPLIES), text  # the target's own words
        if rest:
            ended += 1
            assert '"' + rest == ENDING  # nothing after the quote but the report's end
            report = parse_report(begun + text)
            assert report_outcome(report) == "claim" and report.predictions[0].description == "It wrote:" + quote
    assert ended > 0  # random logits stop a quote within 48 tokens, and the report then parses as a claim
