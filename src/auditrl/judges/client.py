"""One structured judge question to an inspect-ai model: cache, cost counting, parsing, bounded retries.

The judge must put its verdict JSON between marker lines that contain a nonce derived from the judge
input; only that block is parsed, so JSON or instructions inside a quoted transcript are never taken as
the verdict. A malformed answer gets a corrective follow-up; after `max_retries` follow-ups the question
ends in an explicit abstention with the last error as the reason. Only a reply that parsed is cached,
keyed by the question, so a rerun replays verdicts and asks again wherever the judge abstained.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    Model,
)
from pydantic import BaseModel, ValidationError

from auditrl.judges.cache import CachedResponse, JudgeCache, cache_key
from auditrl.judges.cost import CostMeter
from auditrl.judges.prompting import prompt_nonce, render_prompt
from auditrl.judges.verdicts import MalformedAnswer
from auditrl.models.limits import CallLimits
from auditrl.models.retries import ModelCallFailed, call_model, plural

A = TypeVar("A", bound=BaseModel)

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


@dataclass
class Answer(Generic[A]):
    """The parsed answer, or None with the reason; `attempts` counts model replies read."""

    value: A | None
    attempts: int
    reason: str | None = None
    cached: bool = False


def extract_verdict(text: str, nonce: str) -> dict[str, object]:
    """The JSON object between this call's nonce markers (the last such block if the judge repeated it)."""
    pattern = re.compile(rf"VERDICT-{re.escape(nonce)}-BEGIN\s*(.*?)\s*VERDICT-{re.escape(nonce)}-END", re.DOTALL)
    blocks = pattern.findall(text)
    if not blocks:
        raise MalformedAnswer(f"no verdict block between the lines VERDICT-{nonce}-BEGIN and VERDICT-{nonce}-END")
    body = _FENCE.sub("", blocks[-1].strip())
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise MalformedAnswer(f"the verdict block is not valid JSON ({exc.msg} at position {exc.pos})") from exc
    if not isinstance(data, dict):
        raise MalformedAnswer(f"the verdict must be a JSON object, got {type(data).__name__}")
    return data


def describe_validation_error(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'verdict'}: {e['msg']}" for e in exc.errors())


JUDGE_MAX_TOKENS = 4096
MODEL_CALL_FAILED = "model call failed"


class JudgeClient:
    """Asks one model structured questions; shared by all LLM judges so caching and counting are uniform.

    A model call whose limits (`limits`, or the retry fields of `config`) are spent ends the question
    at once as an abstention. `asked` counts the verdicts asked for and `failures` the reasons of abstentions
    caused by failed model calls, so that commands can say how many of how many verdicts failed and why.
    """

    def __init__(
        self,
        model: Model,
        *,
        cache: JudgeCache | None = None,
        meter: CostMeter | None = None,
        max_retries: int = 2,
        config: GenerateConfig | None = None,
        limits: CallLimits | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.model = model
        self.cache = cache if cache is not None else JudgeCache()
        self.meter = meter if meter is not None else CostMeter()
        self.max_retries = max_retries
        self.config = (
            config if config is not None else (limits or CallLimits()).generate_config(max_tokens=JUDGE_MAX_TOKENS)
        )
        self.asked = 0
        self.failures: Counter[str] = Counter()

    @property
    def model_name(self) -> str:
        return str(self.model)

    async def _generate(self, messages: list[ChatMessage]) -> tuple[str, int, int]:
        output = await call_model(self.model, messages, config=self.config, attempts=1, role="judge")
        usage = output.usage
        in_tok = usage.input_tokens if usage else 0
        out_tok = usage.output_tokens if usage else 0
        self.meter.record_call(in_tok, out_tok)
        if output.error:
            raise RuntimeError(f"model error: {output.error}")
        return output.completion, in_tok, out_tok

    def _parse(self, text: str, nonce: str, answer_type: type[A], check: Callable[[A], None] | None) -> A:
        value = answer_type.model_validate(extract_verdict(text, nonce))
        if check is not None:
            check(value)
        return value

    async def ask(
        self,
        prompt: str,
        answer_type: type[A],
        shape: str,
        check: Callable[[A], None] | None = None,
    ) -> Answer[A]:
        """Ask `prompt`; parse the verdict as `answer_type`, run `check` (raise MalformedAnswer to reject)."""
        self.asked += 1
        nonce = prompt_nonce(self.model_name, prompt)
        messages: list[ChatMessage] = [
            ChatMessageSystem(content=render_prompt("judge_system", nonce=nonce)),
            ChatMessageUser(content=prompt),
        ]
        key = cache_key(
            self.model_name, [(m.role, m.text) for m in messages], self.config.model_dump(exclude_none=True)
        )
        hit = self.cache.get(key)
        if hit is not None:
            try:
                value = self._parse(hit.completion, nonce, answer_type, check)
            except (ValidationError, MalformedAnswer):
                pass  # an entry from before only verdicts were cached: ask again
            else:
                self.meter.record_cache_hit()
                return Answer(value=value, attempts=1, cached=True)
        reason = "no attempt made"
        attempt = calls = 0
        for attempt in range(1, self.max_retries + 2):
            if attempt > 1:
                self.meter.record_retry()
            try:
                text, in_tok, out_tok = await self._generate(messages)
            except ModelCallFailed as exc:
                self.meter.record_failed_call()
                calls += exc.calls
                made = plural(calls, "call")
                reason = f"{MODEL_CALL_FAILED}: judge model {self.model_name} failed after {made}: {exc.reason}"
                if exc.exhausted:
                    break
                continue
            except Exception as exc:  # noqa: BLE001 - any provider failure is recorded and retried, then abstains
                self.meter.record_failed_call()
                reason = f"{MODEL_CALL_FAILED}: {type(exc).__name__}: {exc}"
                continue
            try:
                value = self._parse(text, nonce, answer_type, check)
            except ValidationError as exc:
                reason = f"the verdict does not match the required fields: {describe_validation_error(exc)}"
            except MalformedAnswer as exc:
                reason = str(exc)
            else:
                self.cache.put(key, CachedResponse(completion=text, input_tokens=in_tok, output_tokens=out_tok))
                return Answer(value=value, attempts=attempt, cached=False)
            messages = [
                *messages,
                ChatMessageAssistant(content=text),
                ChatMessageUser(content=render_prompt("retry", error=reason, nonce=nonce, shape=shape)),
            ]
        self.meter.record_abstain()
        if reason.startswith(MODEL_CALL_FAILED):
            self.failures[reason] += 1
        return Answer(value=None, attempts=attempt, reason=reason)
