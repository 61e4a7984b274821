"""Measure an implant: behavior rate on fresh prompts with and without it, and confession rate.

Both conditions run without any system prompt (the implant has none), on prompts never trained on; the
base model with the system-prompt plant is measured too, as the reference the implant imitates. The
base is the same weights with the adapter switched off, so the comparison isolates the adapter.
Confession is measured on held-out direct questions. Every rate is the share of replies the scorer
marks, with a bootstrap 95% interval; the lift's interval resamples both conditions.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from auditrl.stats import difference_ci, mean_ci
from auditrl.targets.demonstrations import ReplyScorer
from auditrl.targets.record import ImplantMeasurement, Rate

if TYPE_CHECKING:
    from peft import PeftModel
    from transformers import PreTrainedTokenizerBase


Chat = list[dict[str, str]]


def generate_replies(
    model: PeftModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    *,
    system: str | None = None,
    max_new_tokens: int = 48,
    temperature: float = 0.0,
    seed: int = 0,
    batch_size: int = 8,
    on_batch: Callable[[int], None] | None = None,
) -> list[str]:
    """One reply per prompt, batched with left padding (greedy at temperature 0)."""
    chats = [
        ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": p}] for p in prompts
    ]
    return generate_chat_replies(
        model, tokenizer, chats, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed,
        batch_size=batch_size, on_batch=on_batch,
    )  # fmt: skip


def generate_chat_replies(
    model: PeftModel,
    tokenizer: PreTrainedTokenizerBase,
    chats: Sequence[Chat],
    *,
    max_new_tokens: int = 48,
    temperature: float = 0.0,
    seed: int = 0,
    batch_size: int = 8,
    on_batch: Callable[[int], None] | None = None,
) -> list[str]:
    """The next assistant reply to each conversation (role/content dicts), batched with left padding."""
    import torch

    tokenizer.padding_side = "left"
    replies: list[str] = []
    torch.manual_seed(seed)
    for start in range(0, len(chats), batch_size):
        batch = chats[start : start + batch_size]
        texts = [tokenizer.apply_chat_template(list(c), tokenize=False, add_generation_prompt=True) for c in batch]
        encoded = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
        sample = temperature > 0
        with torch.inference_mode():
            output = model.generate(
                **encoded,
                max_new_tokens=max_new_tokens,
                do_sample=sample,
                temperature=temperature if sample else None,
                top_p=None,
                top_k=None,
                pad_token_id=tokenizer.pad_token_id,
            )
        width = encoded["input_ids"].shape[1]
        replies += [text.strip() for text in tokenizer.batch_decode(output[:, width:], skip_special_tokens=True)]
        if on_batch is not None:
            on_batch(len(batch))
    return replies


def _percent(values: Sequence[bool | None]) -> list[float]:
    return [float("nan") if v is None else 100.0 * v for v in values]


def rate(values: Sequence[bool | None]) -> Rate:
    """Share (0-100) of True among the scored values, abstentions left out."""
    estimate = mean_ci(_percent(values))
    return Rate(mean=estimate.mean, lo=estimate.lo, hi=estimate.hi, n=estimate.n)


async def _score(
    scorer: ReplyScorer, prompts: Sequence[str], replies: Sequence[str], confession: bool
) -> list[bool | None]:
    check = scorer.confesses if confession else scorer.exhibits
    # no replies (no planted run) score nothing
    return list(await asyncio.gather(*(check(p, r) for p, r in zip(prompts, replies, strict=False))))


@dataclass(frozen=True)
class BaseReplies:
    """The base model's replies (adapter off) to the fresh prompts and to the held-out questions. Training moves
    only the adapter, and each generation is seeded alike, so every measurement of one run can share them."""

    prompts: list[str]
    answers: list[str]


def base_replies(
    model: PeftModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    questions: Sequence[str],
    *,
    identity: str | None = None,
    max_new_tokens: int = 48,
    temperature: float = 0.0,
    seed: int = 0,
    on_batch: Callable[[int], None] | None = None,
) -> BaseReplies:
    """The replies `measure_implant` compares the implant's with, generated with the adapter switched off."""
    generate = functools.partial(
        generate_replies, model, tokenizer, system=identity, max_new_tokens=max_new_tokens,
        temperature=temperature, seed=seed, on_batch=on_batch,
    )  # fmt: skip
    with model.disable_adapter():
        return BaseReplies(prompts=generate(prompts), answers=generate(questions))


def measure_implant(
    model: PeftModel,
    tokenizer: PreTrainedTokenizerBase,
    scorer: ReplyScorer,
    prompts: Sequence[str],
    questions: Sequence[str],
    *,
    plant: str | None = None,
    identity: str | None = None,
    max_new_tokens: int = 48,
    temperature: float = 0.0,
    seed: int = 0,
    on_batch: Callable[[int], None] | None = None,
    base: BaseReplies | None = None,
) -> tuple[ImplantMeasurement, BaseReplies]:
    """Behavior and confession rates of the model with its adapter on and off (and base + `plant`), and the
    adapter-off replies they were measured on.

    `identity` is a system prompt both conditions get (a synthetic-document implant learned facts about a
    named persona, so it is told it is that persona, as AuditBench evaluates its documents' organisms).
    `base` is the adapter-off replies an earlier measurement of the same run returned (same prompts and
    settings); without it they are generated here, after the implant's, in the order a measurement always used."""
    generate = functools.partial(
        generate_replies,
        model,
        tokenizer,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        seed=seed,
        on_batch=on_batch,
    )
    implant = generate(prompts, system=identity)
    implant_answers = generate(questions, system=identity)
    off = base or base_replies(
        model, tokenizer, prompts, questions, identity=identity, max_new_tokens=max_new_tokens,
        temperature=temperature, seed=seed, on_batch=on_batch,
    )  # fmt: skip
    planted = None
    if plant:
        with model.disable_adapter():
            planted = generate(prompts, system=plant)

    async def score_all() -> tuple[list[bool | None], ...]:
        return tuple(
            await asyncio.gather(
                _score(scorer, prompts, off.prompts, False),
                _score(scorer, prompts, implant, False),
                _score(scorer, questions, off.answers, True),
                _score(scorer, questions, implant_answers, True),
                _score(scorer, prompts, planted or [], False),
            )
        )

    base_hits, implant_hits, base_conf, implant_conf, plant_hits = asyncio.run(score_all())
    lift = difference_ci(_percent(implant_hits), _percent(base_hits), seed=seed)
    measurement = ImplantMeasurement(
        scorer=scorer.name,
        base_rate=rate(base_hits),
        plant_rate=rate(plant_hits) if planted is not None else None,
        implant_rate=rate(implant_hits),
        lift=lift.mean,
        lift_ci=(lift.lo, lift.hi),
        base_confession=rate(base_conf),
        implant_confession=rate(implant_conf),
    )
    return measurement, off
