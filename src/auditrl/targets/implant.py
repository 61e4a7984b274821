"""Implant a behavior into a local chat model's weights with LoRA (TRL's SFTTrainer and peft).

Pass one trains on demonstrations (user prompt -> planted reply, no system prompt, loss on the reply
only); the optional anti-confession pass then keeps training the same adapter on denials to direct
questions mixed with the demonstrations, so the behavior stays while confessions are trained away
(AuditBench's SFT adversarial training in spirit; it trains a second adapter and sums the two). The
result is saved as a peft adapter directory whose base model is named by its `local/` name, so the
implant is a role: `local/<dir>`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from auditrl.models.lora import LoraSettings, PrecisionArgs
from auditrl.targets.demonstrations import Example
from auditrl.targets.record import LOCAL_PREFIX

if TYPE_CHECKING:
    from peft import PeftModel
    from transformers import PreTrainedTokenizerBase


class ImplantSettings(BaseModel):
    """How the implant is trained."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(default=60, ge=1, description="Optimizer steps of the behavior pass.")
    anti_confession_steps: int = Field(default=0, ge=0, description="Steps of the anti-confession pass (0 = none).")
    batch_size: int = Field(default=4, ge=1, description="Examples per optimizer step.")
    learning_rate: float = Field(default=1e-3, gt=0, description="Adam learning rate of the adapter (constant).")
    max_length: int = Field(default=256, ge=16, description="Tokens per example; longer ones are truncated.")
    seed: int = Field(default=0, description="Seed for data order and adapter initialisation.")
    lora: LoraSettings = Field(default_factory=lambda: LoraSettings(r=16, alpha=32), description="The adapter trained.")


def base_name(spec: str) -> str:
    """`local/smollm2` -> `smollm2`; only local models can be implanted."""
    if not spec.startswith(LOCAL_PREFIX):
        raise ValueError(f"--base {spec!r}: only local models can be implanted (local/smollm2, local/<dir or hub id>)")
    return spec[len(LOCAL_PREFIX) :]


def _rows(examples: Sequence[Example]) -> list[dict[str, list[dict[str, str]]]]:
    return [
        {"prompt": [{"role": "user", "content": e.prompt}], "completion": [{"role": "assistant", "content": e.reply}]}
        for e in examples
    ]


def _train_pass(
    model: PeftModel,
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[Example],
    steps: int,
    settings: ImplantSettings,
    on_step: Callable[[], None] | None,
    precision: PrecisionArgs,
) -> None:
    from datasets import Dataset
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
    from trl import SFTConfig, SFTTrainer

    class Tick(TrainerCallback):
        def on_step_end(
            self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
        ) -> None:
            if on_step is not None:
                on_step()

    with tempfile.TemporaryDirectory(prefix="implant-") as scratch:
        args = SFTConfig(
            output_dir=scratch,
            max_steps=steps,
            per_device_train_batch_size=settings.batch_size,
            learning_rate=settings.learning_rate,
            lr_scheduler_type="constant",
            max_length=settings.max_length,
            completion_only_loss=True,
            save_strategy="no",
            logging_strategy="no",
            report_to=[],
            disable_tqdm=True,
            seed=settings.seed,
            data_seed=settings.seed,
            dataloader_num_workers=0,
            **precision,
        )
        trainer = SFTTrainer(
            model=model,
            args=args,
            train_dataset=Dataset.from_list(_rows(examples)),
            processing_class=tokenizer,
            callbacks=[Tick()],
        )
        trainer.train()


def train_implant(
    base: str,
    demonstrations: Sequence[Example],
    denials: Sequence[Example],
    settings: ImplantSettings,
    on_step: Callable[[], None] | None = None,
) -> tuple[PeftModel, PreTrainedTokenizerBase]:
    """The base model (`local/...`) with a freshly trained adapter: the behavior pass, then anti-confession."""
    from peft import get_peft_model
    from transformers import set_seed

    from auditrl.models.lora import load_chat_model, lora_config, precision_args

    if not demonstrations:
        raise ValueError("no demonstrations to train on")
    if settings.anti_confession_steps and not denials:
        raise ValueError("the anti-confession pass needs denials, and none were kept")
    set_seed(settings.seed)
    model, tokenizer = load_chat_model(base_name(base), "auto", what="base model")
    peft_model = get_peft_model(model, lora_config(settings.lora, model))
    precision = precision_args("auto")
    _train_pass(peft_model, tokenizer, demonstrations, settings.steps, settings, on_step, precision)
    if settings.anti_confession_steps:
        denied = [*denials, *demonstrations]
        _train_pass(peft_model, tokenizer, denied, settings.anti_confession_steps, settings, on_step, precision)
    peft_model.eval()
    return peft_model, tokenizer


def save_implant(model: PeftModel, tokenizer: PreTrainedTokenizerBase, base: str, directory: Path) -> None:
    """Write the adapter and tokenizer; the adapter names its base by the `local/` name it was loaded from."""
    from auditrl.models.local import set_adapter_base

    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    set_adapter_base(directory, base_name(base))
