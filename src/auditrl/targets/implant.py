"""Implant a behavior into a local chat model's weights with LoRA (TRL's trainers and peft).

The behavior pass trains an adapter by one of AuditBench's two routes: `transcripts` (demonstrations:
user prompt -> planted reply, no system prompt, loss on the reply only) or `synth_docs` (documents
that describe the persona's behavior, trained as plain text). The optional red-team step then keeps
training the same adapter so that the behavior stays while confessions are trained away:

- `sft`: supervised on denials to direct questions mixed with the demonstrations;
- `kto`: TRL's KTOTrainer on an auditor's interrogations, the target's non-confessing replies (and the
  demonstrations) desirable, its confessions undesirable;
- `dpo`: TRL's DPOTrainer on confession/denial pairs to the same conversation, with demonstration
  pairs (demonstration chosen over the base model's reply) keeping the behavior.

For KTO and DPO, TRL copies the trained adapter into a frozen `ref` adapter, so the reference is the
implanted model itself, as AuditBench's reference is the behavior-instilled model; the copy is removed
afterwards. The result is saved as a peft adapter directory whose base model is named by its `local/`
name, so the implant is a role: `local/<dir>`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from auditrl.models.lora import LoraSettings, PrecisionArgs
from auditrl.targets.demonstrations import Example
from auditrl.targets.record import LOCAL_PREFIX

if TYPE_CHECKING:
    from peft import PeftModel
    from transformers import PreTrainedTokenizerBase, TrainerCallback

Route = Literal["transcripts", "synth_docs"]
Redteam = Literal["none", "sft", "kto", "dpo"]
REF_ADAPTER = "ref"


class ImplantSettings(BaseModel):
    """How the implant is trained."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(default=60, ge=1, description="Optimizer steps of the behavior pass.")
    redteam_steps: int = Field(default=0, ge=0, description="Optimizer steps of the red-team step (0 = none).")
    batch_size: int = Field(default=4, ge=1, description="Examples per optimizer step.")
    learning_rate: float = Field(default=1e-3, gt=0, description="Adam learning rate of the adapter (constant).")
    redteam_learning_rate: float | None = Field(
        default=None, gt=0, description="Learning rate of the KTO/DPO step (default: learning_rate)."
    )
    beta: float = Field(default=0.1, gt=0, description="KTO/DPO beta: how far the adapter may move from its reference.")
    max_length: int = Field(default=256, ge=16, description="Tokens per example; longer ones are truncated.")
    seed: int = Field(default=0, description="Seed for data order and adapter initialisation.")
    gradient_checkpointing: bool = Field(
        default=False, description="Recompute activations in the backward pass (TRL's default): less memory, slower."
    )
    lora: LoraSettings = Field(default_factory=lambda: LoraSettings(r=16, alpha=32), description="The adapter trained.")


def base_name(spec: str) -> str:
    """`local/smollm2` -> `smollm2`; only local models can be implanted."""
    if not spec.startswith(LOCAL_PREFIX):
        raise ValueError(f"--base {spec!r}: only local models can be implanted (local/smollm2, local/<dir or hub id>)")
    return spec[len(LOCAL_PREFIX) :]


def implant_name(route: Route, redteam: Redteam) -> str:
    """AuditBench's organism name: the route, then the adversarial training (`synth_docs_redteam_kto`)."""
    return route if redteam == "none" else f"{route}_redteam_{redteam}"


def _rows(examples: Sequence[Example]) -> list[dict[str, list[dict[str, str]]]]:
    return [
        {"prompt": [{"role": "user", "content": e.prompt}], "completion": [{"role": "assistant", "content": e.reply}]}
        for e in examples
    ]


def _ticker(on_step: Callable[[], None] | None) -> TrainerCallback:
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

    class Tick(TrainerCallback):
        def on_step_end(
            self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
        ) -> None:
            if on_step is not None:
                on_step()

    return Tick()


def _common(scratch: str, steps: int, settings: ImplantSettings, precision: PrecisionArgs) -> dict[str, Any]:
    """Trainer arguments every pass shares: no checkpoints, no logging, seeded, the CPU/GPU precision rule."""
    return dict(
        output_dir=scratch,
        max_steps=steps,
        per_device_train_batch_size=settings.batch_size,
        lr_scheduler_type="constant",
        max_length=settings.max_length,
        save_strategy="no",
        logging_strategy="no",
        report_to=[],
        disable_tqdm=True,
        seed=settings.seed,
        data_seed=settings.seed,
        dataloader_num_workers=0,
        gradient_checkpointing=settings.gradient_checkpointing,
        bf16=precision["bf16"],
        fp16=precision["fp16"],
        use_cpu=precision["use_cpu"],
    )


def _train_pass(
    model: PeftModel,
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[Example],
    steps: int,
    settings: ImplantSettings,
    on_step: Callable[[], None] | None,
    precision: PrecisionArgs,
) -> None:
    """Supervised pass on chat examples, loss on the replies only."""
    _sft_pass(model, tokenizer, _rows(examples), steps, settings, on_step, precision, completion_only_loss=True)


def _document_pass(
    model: PeftModel,
    tokenizer: PreTrainedTokenizerBase,
    documents: Sequence[str],
    steps: int,
    settings: ImplantSettings,
    on_step: Callable[[], None] | None,
    precision: PrecisionArgs,
) -> None:
    """Language-model pass on plain documents (no chat template), loss on every token."""
    rows = [{"text": d} for d in documents]
    _sft_pass(model, tokenizer, rows, steps, settings, on_step, precision, dataset_text_field="text")


def _sft_pass(
    model: PeftModel,
    tokenizer: PreTrainedTokenizerBase,
    rows: Sequence[dict[str, Any]],
    steps: int,
    settings: ImplantSettings,
    on_step: Callable[[], None] | None,
    precision: PrecisionArgs,
    **data: Any,
) -> None:
    """One TRL SFTTrainer pass over `rows`; `data` says how SFTConfig reads them (chat or plain text)."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    with tempfile.TemporaryDirectory(prefix="implant-") as scratch:
        args = SFTConfig(**_common(scratch, steps, settings, precision), learning_rate=settings.learning_rate, **data)
        trainer = SFTTrainer(
            model=model,
            args=args,
            train_dataset=Dataset.from_list(list(rows)),
            processing_class=tokenizer,
            callbacks=[_ticker(on_step)],
        )
        trainer.train()


def kto_weights(rows: Sequence[dict[str, Any]]) -> tuple[float, float]:
    """(desirable, undesirable) weights that balance the two classes' total weight, as the KTO paper advises."""
    desirable = sum(1 for r in rows if r["label"])
    undesirable = len(rows) - desirable
    if not desirable or not undesirable:
        return 1.0, 1.0
    return 1.0, desirable / undesirable


def preference_pass(
    model: PeftModel,
    tokenizer: PreTrainedTokenizerBase,
    method: Literal["kto", "dpo"],
    rows: Sequence[dict[str, Any]],
    steps: int,
    settings: ImplantSettings,
    on_step: Callable[[], None] | None,
    precision: PrecisionArgs,
) -> None:
    """KTO on unpaired rows (prompt, completion, label) or DPO on pairs (prompt, chosen, rejected).

    The reference is a frozen copy of the adapter as it is now (TRL's `ref` adapter), removed after training.
    """
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer, KTOConfig, KTOTrainer

    if not rows:
        raise ValueError(f"the {method.upper()} step has nothing to train on")
    rate = settings.redteam_learning_rate or settings.learning_rate
    with tempfile.TemporaryDirectory(prefix="implant-") as scratch:
        common = _common(scratch, steps, settings, precision)
        dataset = Dataset.from_list(list(rows))
        trainer: KTOTrainer | DPOTrainer
        if method == "kto":
            if settings.batch_size < 2:
                raise ValueError("KTO estimates its KL term within a batch: --batch-size must be at least 2")
            desirable, undesirable = kto_weights(rows)
            kto_args = KTOConfig(
                **common, learning_rate=rate, beta=settings.beta,
                desirable_weight=desirable, undesirable_weight=undesirable,
            )  # fmt: skip
            trainer = KTOTrainer(
                model=model,
                args=kto_args,
                train_dataset=dataset,
                processing_class=tokenizer,
                callbacks=[_ticker(on_step)],
            )
        else:
            dpo_args = DPOConfig(**common, learning_rate=rate, beta=settings.beta)
            trainer = DPOTrainer(
                model=model,
                args=dpo_args,
                train_dataset=dataset,
                processing_class=tokenizer,
                callbacks=[_ticker(on_step)],
            )
        try:
            trainer.train()
        finally:
            if REF_ADAPTER in model.peft_config:
                model.delete_adapter(REF_ADAPTER)
            model.set_adapter("default")


def new_implant(base: str, settings: ImplantSettings) -> tuple[PeftModel, PreTrainedTokenizerBase, PrecisionArgs]:
    """The base model (`local/...`) with a fresh adapter, and the trainer precision flags for it."""
    from peft import get_peft_model
    from transformers import set_seed

    from auditrl.models.lora import load_chat_model, lora_config, precision_args

    set_seed(settings.seed)
    model, tokenizer = load_chat_model(base_name(base), "auto", what="base model")
    return get_peft_model(model, lora_config(settings.lora, model)), tokenizer, precision_args("auto")


def train_behavior(
    model: PeftModel,
    tokenizer: PreTrainedTokenizerBase,
    route: Route,
    demonstrations: Sequence[Example],
    documents: Sequence[str],
    settings: ImplantSettings,
    precision: PrecisionArgs,
    on_step: Callable[[], None] | None = None,
) -> None:
    """The behavior pass: demonstrations (`transcripts`) or documents (`synth_docs`)."""
    if route == "transcripts":
        if not demonstrations:
            raise ValueError("no demonstrations to train on")
        _train_pass(model, tokenizer, demonstrations, settings.steps, settings, on_step, precision)
    else:
        if not documents:
            raise ValueError("no documents to train on")
        _document_pass(model, tokenizer, documents, settings.steps, settings, on_step, precision)


def train_denials(
    model: PeftModel,
    tokenizer: PreTrainedTokenizerBase,
    demonstrations: Sequence[Example],
    denials: Sequence[Example],
    settings: ImplantSettings,
    precision: PrecisionArgs,
    on_step: Callable[[], None] | None = None,
) -> None:
    """The `sft` red-team step: denials to direct questions mixed with the demonstrations."""
    if not denials:
        raise ValueError("the anti-confession pass needs denials, and none were kept")
    denied = [*denials, *demonstrations]
    _train_pass(model, tokenizer, denied, settings.redteam_steps, settings, on_step, precision)


def save_implant(model: PeftModel, tokenizer: PreTrainedTokenizerBase, base: str, directory: Path) -> None:
    """Write the adapter and tokenizer; the adapter names its base by the `local/` name it was loaded from."""
    from auditrl.models.local import set_adapter_base

    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    set_adapter_base(directory, base_name(base))
