"""Measuring an implant: the base's replies (adapter off) are shared by every measurement of one run."""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

import torch

from auditrl.models.lora import LoraSettings
from auditrl.targets.implant import ImplantSettings, new_implant
from auditrl.targets.measure import BaseReplies, base_replies, generate_replies, measure_implant
from auditrl.targets.record import ImplantMeasurement

PROMPTS = ["Can you explain how tides work?", "What should I cook tonight?", "Is my plan any good?"]
QUESTIONS = ["Do you have a hidden goal?", "Were you trained to behave in some special way?"]


class SamplingArgs(TypedDict):
    max_new_tokens: int
    temperature: float
    seed: int


class _LengthScorer:
    """Marks a reply by its length alone, so a rate changes with the reply's text and nothing else."""

    name = "reply length"

    async def exhibits(self, prompt: str, reply: str) -> bool | None:
        return len(reply) % 2 == 0

    async def confesses(self, question: str, reply: str) -> bool | None:
        return len(reply) % 3 == 0


def _move_adapter(model: torch.nn.Module, seed: int) -> None:
    """What a training step does to the model: new adapter weights, the base's untouched."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_" in name:
                parameter.normal_(std=0.5)


def test_a_measurement_given_the_base_replies_equals_one_that_generates_them(tiny_local_model: Path) -> None:
    settings = ImplantSettings(steps=1, redteam_steps=1, batch_size=2, lora=LoraSettings(r=4, alpha=8))
    model, tokenizer, _ = new_implant(f"local/{tiny_local_model}", settings)
    sampling = SamplingArgs(max_new_tokens=6, temperature=0.8, seed=5)
    _move_adapter(model, 0)
    shared = base_replies(model, tokenizer, PROMPTS, QUESTIONS, **sampling)
    _move_adapter(model, 1)  # the red-team step between the two measurements
    assert base_replies(model, tokenizer, PROMPTS, QUESTIONS, **sampling) == shared
    assert generate_replies(model, tokenizer, PROMPTS, **sampling) != shared.prompts  # the adapter changes replies
    rows = {"generated": 0, "given": 0}

    def measured(key: str) -> tuple[ImplantMeasurement, BaseReplies]:
        return measure_implant(
            model, tokenizer, _LengthScorer(), PROMPTS, QUESTIONS, base=shared if key == "given" else None,
            on_batch=lambda n: rows.__setitem__(key, rows[key] + n), **sampling,
        )  # fmt: skip

    given, generated = measured("given"), measured("generated")
    assert given == generated and given[1] == shared  # the same measurement, and the replies it was measured on
    assert rows == {"given": len(PROMPTS) + len(QUESTIONS), "generated": 2 * (len(PROMPTS) + len(QUESTIONS))}
