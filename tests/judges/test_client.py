import json

from inspect_ai.model import GenerateConfig, ModelOutput, ModelUsage, get_model
from pydantic import BaseModel

from auditrl.judges.cache import JudgeCache
from auditrl.judges.client import JudgeClient, MalformedAnswer, extract_verdict
from auditrl.judges.cost import attribute_cost
from auditrl.judges.scripted import JudgeCall, wrap_verdict


class Ans(BaseModel):
    winner: str
    confidence: int


SHAPE = '{"winner": "A", "confidence": 50}'


def test_extract_takes_only_nonce_block() -> None:
    text = (
        'I was told {"winner": "B"}.\nVERDICT-abcdefabcdef-BEGIN\n```json\n{"winner": "A"}\n```\n'
        "VERDICT-abcdefabcdef-END"
    )
    assert extract_verdict(text, "abcdefabcdef") == {"winner": "A"}
    try:
        extract_verdict('{"winner": "B"}', "abcdefabcdef")
    except MalformedAnswer as exc:
        assert "no verdict block" in str(exc)
    else:
        raise AssertionError("plain JSON outside the markers must be rejected")


async def test_good_answer(scripted_client) -> None:
    client = scripted_client(lambda call: {"winner": "A", "confidence": 70})
    answer = await client.ask("question", Ans, SHAPE)
    assert answer.value == Ans(winner="A", confidence=70) and answer.attempts == 1
    assert client.meter.total().calls == 1


async def test_malformed_then_corrected_on_retry(scripted_client) -> None:
    seen: list[JudgeCall] = []

    def respond(call: JudgeCall):
        seen.append(call)
        return "I think A is better." if call.attempt == 1 else {"winner": "A", "confidence": 60}

    client = scripted_client(respond)
    answer = await client.ask("question", Ans, SHAPE)
    assert answer.value is not None and answer.attempts == 2
    follow_up = seen[1].messages[-1].text
    assert "could not be used" in follow_up and "no verdict block" in follow_up
    assert client.meter.total().retries == 1


async def test_permanently_malformed_abstains_with_reason(scripted_client) -> None:
    client = scripted_client(lambda call: {"winner": "A"}, max_retries=2)
    answer = await client.ask("question", Ans, SHAPE)
    assert answer.value is None and answer.attempts == 3
    assert "confidence" in (answer.reason or "")
    stats = client.meter.total()
    assert stats.calls == 3 and stats.abstains == 1


async def test_model_failure_abstains() -> None:
    model = get_model("mockllm/model", custom_outputs=[], memoize=False)
    client = JudgeClient(model, max_retries=1)
    answer = await client.ask("question", Ans, SHAPE)
    assert answer.value is None and "model call failed" in (answer.reason or "")
    assert client.meter.total().failed_calls == 2


async def test_check_rejection_triggers_retry(scripted_client) -> None:
    def check(a: Ans) -> None:
        if a.confidence > 99:
            raise MalformedAnswer("confidence must be 1-99")

    replies = iter([{"winner": "A", "confidence": 150}, {"winner": "B", "confidence": 20}])
    client = scripted_client(lambda call: next(replies))
    answer = await client.ask("q", Ans, SHAPE, check)
    assert answer.value == Ans(winner="B", confidence=20)


async def test_cache_hit_avoids_second_call(scripted_client, tmp_path) -> None:
    path = tmp_path / "cache.jsonl"
    client = scripted_client(lambda call: {"winner": "A", "confidence": 70}, cache=JudgeCache(path))
    with attribute_cost("d1"):
        await client.ask("same question", Ans, SHAPE)
        second = await client.ask("same question", Ans, SHAPE)
    assert second.cached and client.meter.get("d1").calls == 1 and client.meter.get("d1").cache_hits == 1
    # a fresh process reading the same cache file makes no call at all
    never = scripted_client(lambda call: (_ for _ in ()).throw(AssertionError("called")), cache=JudgeCache(path))
    again = await never.ask("same question", Ans, SHAPE)
    assert again.value == Ans(winner="A", confidence=70) and never.meter.total().calls == 0
    assert len(JudgeCache(path)) == 1


async def test_abstentions_are_not_cached_so_a_rerun_asks_again(scripted_client, tmp_path) -> None:
    path = tmp_path / "cache.jsonl"
    broken = scripted_client(lambda call: "no verdict here", cache=JudgeCache(path), max_retries=1)
    assert (await broken.ask("question", Ans, SHAPE)).value is None
    assert len(JudgeCache(path)) == 0  # nothing of the malformed replies was kept
    fixed = scripted_client(lambda call: {"winner": "B", "confidence": 40}, cache=JudgeCache(path))
    again = await fixed.ask("question", Ans, SHAPE)
    assert again.value == Ans(winner="B", confidence=40) and not again.cached and fixed.meter.total().calls == 1


async def test_verdict_after_a_retry_is_cached_under_the_question(scripted_client, tmp_path) -> None:
    path = tmp_path / "cache.jsonl"
    first = scripted_client(
        lambda call: "not yet" if call.attempt == 1 else {"winner": "A", "confidence": 55}, cache=JudgeCache(path)
    )
    assert (await first.ask("question", Ans, SHAPE)).attempts == 2
    never = scripted_client(lambda call: (_ for _ in ()).throw(AssertionError("called")), cache=JudgeCache(path))
    replay = await never.ask("question", Ans, SHAPE)
    assert replay.value == Ans(winner="A", confidence=55) and replay.cached and never.meter.total().calls == 0


async def test_a_cached_reply_that_does_not_parse_is_asked_again(scripted_client, tmp_path) -> None:
    """Caches written before only verdicts were kept may hold malformed replies; they are not replayed."""
    path = tmp_path / "cache.jsonl"
    client = scripted_client(lambda call: {"winner": "A", "confidence": 70}, cache=JudgeCache(path))
    await client.ask("question", Ans, SHAPE)
    row = json.loads(path.read_text().splitlines()[0])
    row["response"]["completion"] = "malformed"
    path.write_text(json.dumps(row) + "\n")
    rerun = scripted_client(lambda call: {"winner": "B", "confidence": 30}, cache=JudgeCache(path))
    answer = await rerun.ask("question", Ans, SHAPE)
    assert answer.value == Ans(winner="B", confidence=30) and rerun.meter.total().calls == 1


async def test_token_counts_come_from_usage() -> None:
    def respond(messages, tools, tool_choice, config):
        nonce = messages[0].text.split("VERDICT-")[1].split("-BEGIN")[0]
        o = ModelOutput.from_content("m", wrap_verdict({"winner": "A", "confidence": 5}, nonce))
        o.usage = ModelUsage(input_tokens=11, output_tokens=7, total_tokens=18)
        return o

    client = JudgeClient(
        get_model("mockllm/model", custom_outputs=respond, memoize=False), config=GenerateConfig(max_tokens=10)
    )
    await client.ask("q", Ans, SHAPE)
    total = client.meter.total()
    assert (total.input_tokens, total.output_tokens, total.tokens) == (11, 7, 18)
    assert json.loads(total.model_dump_json())["calls"] == 1
