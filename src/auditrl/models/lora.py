"""A chat model loaded for LoRA training, the adapter it trains, and supervised fine-tuning of that adapter on
token examples (TRL's SFTTrainer): what the GRPO trainer, its warm start and a behavior implant share."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from pydantic import Field

from auditrl.configfile import ConfigModel
from auditrl.models.local import WeightsSource, dense_source, resolve_source
from auditrl.models.precision import DType, on_gpu, resolve_dtype, torch_dtype

if TYPE_CHECKING:  # peft and transformers are imported where a model is built: a config that names LoraSettings
    # (every `auditrl train` reads its kind through one) does not pay for them
    from peft import LoraConfig, PeftModel
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

IGNORED = -100
TokenWeights = Callable[[list[int]], dict[int, float]]
"""Per example, from its labels: the loss weight of chosen label positions (every other labelled token weighs 1)."""
ExampleLoss = Callable[[Any, dict[str, Any]], Any]
"""A loss of one example from the model and the example, in place of the labelled tokens' cross-entropy."""


class FineTuning(Protocol):
    """What a fine-tuning run reads of its settings (SFTSettings, or an experiment's own)."""

    episodes: int
    epochs: float
    batch_size: int
    learning_rate: float
    seed: int

    def model_dump(self) -> dict[str, Any]: ...


class LoraSettings(ConfigModel):
    """peft LoRA adapter: only these weights are trained, so checkpoints stay small."""

    r: int = Field(default=8, ge=1, description="Adapter rank.")
    alpha: int = Field(default=16, ge=1, description="LoRA scaling numerator (scale = alpha / r).")
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0, description="Dropout on the adapter's input during training.")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        min_length=1,
        description="Module names that get an adapter (never lm_head: TRL computes logprobs from its weight).",
    )
    last_layers: int | None = Field(
        default=None,
        ge=1,
        description="Adapt only the last N decoder layers (None = all). The backward pass then stops N layers "
        "from the top, which on a CPU is most of an update's cost.",
    )


def load_chat_model(
    name: str,
    dtype: DType,
    gguf_file: str | None = None,
    attn_implementation: str | None = None,
    chat_template: str | None = None,
    what: str = "model",
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A chat model and its tokenizer (a GGUF file is read from its dense conversion), its chat template replaced by
    `chat_template` (Jinja text) when given, and a pad token set; raises ValueError naming `what` when it has no chat
    template."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = resolve_source(name)
    weights = dense_source(WeightsSource(source.location, gguf_file or source.gguf_file))
    tokenizer = AutoTokenizer.from_pretrained(weights.location)
    kwargs: dict[str, Any] = {"attn_implementation": attn_implementation} if attn_implementation else {}
    model = AutoModelForCausalLM.from_pretrained(weights.location, dtype=torch_dtype(dtype), **kwargs)
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    if tokenizer.chat_template is None:
        raise ValueError(f"{what} '{name}' has no chat template; use an instruction-tuned model")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


class PrecisionArgs(TypedDict):
    """The precision flags of a transformers Trainer (TrainingArguments) that `precision_args` sets."""

    bf16: bool
    fp16: bool
    use_cpu: bool


def precision_args(dtype: DType) -> PrecisionArgs:
    """A transformers Trainer's precision flags for a model's dtype. Needed because TRL's SFTConfig turns bf16
    mixed precision on by default, even on a CPU (`use_cpu=True`) that emulates bf16 at a 60th of float32's speed."""
    resolved = resolve_dtype(dtype)
    return {"bf16": resolved == "bfloat16", "fp16": resolved == "float16", "use_cpu": not on_gpu()}


def lora_config(lora: LoraSettings, model: PreTrainedModel) -> LoraConfig:
    """The peft adapter of `lora` for `model` (its `last_layers` resolved against the model's depth)."""
    from peft import LoraConfig

    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        layers_to_transform=top_layers(model, lora.last_layers),
        task_type="CAUSAL_LM",
    )


def top_layers(model: PreTrainedModel | PeftModel, last: int | None) -> list[int] | None:
    """Indices of the last `last` decoder layers (None = every layer), for peft's `layers_to_transform`."""
    if last is None:
        return None
    total = int(model.config.num_hidden_layers)
    return list(range(max(0, total - last), total))


def example_loss_trainer(base: type, loss: ExampleLoss) -> type:
    """`base` (TRL's SFTTrainer) trained one example a micro-batch by `loss` (an experiment's own loss, e.g. one
    that passes an audit's prefix once and several continuations after it)."""

    class ExampleLossTrainer(base):
        def compute_loss(
            self,
            model: PreTrainedModel,
            inputs: dict[str, Any],
            return_outputs: bool = False,
            num_items_in_batch: Any = None,
        ) -> Any:
            value = loss(model, inputs | {"step": self.state.global_step + 1})
            return (value, None) if return_outputs else value

    return ExampleLossTrainer


def labelled_positions_trainer(base: type, token_weights: TokenWeights | None = None) -> type:
    """`base` (TRL's SFTTrainer) with a loss that projects only the positions predicting a labelled token
    through the LM head: most of an audit is prompt and environment, and on a CPU the 49k-word head over every
    position (with TRL's entropy metric over it) cost more than half of a step. The loss is the cross-entropy
    summed over the labelled tokens, each weighed by `token_weights` (1 where it names none), divided by the
    number of labelled tokens (unweighted, TRL's mean); TRL's entropy and token-accuracy metrics are not logged."""
    import torch
    import torch.nn.functional as F

    class LabelledPositionsTrainer(base):
        def compute_loss(
            self,
            model: PreTrainedModel,
            inputs: dict[str, Any],
            return_outputs: bool = False,
            num_items_in_batch: Any = None,
        ) -> Any:
            targets = inputs["labels"][:, 1:]
            positions = (targets != IGNORED).any(dim=0).nonzero().squeeze(-1)
            outputs = model(
                input_ids=inputs["input_ids"], attention_mask=inputs.get("attention_mask"), logits_to_keep=positions
            )
            kept = targets[:, positions]
            weights = torch.ones(targets.shape, device=targets.device)
            if token_weights is not None:
                for row, labels in enumerate(inputs["labels"].tolist()):
                    for i, weight in token_weights(labels).items():
                        weights[row, i - 1] = weight
            losses = F.cross_entropy(
                outputs.logits.float().flatten(0, 1), kept.flatten(), ignore_index=IGNORED, reduction="none"
            )
            total = (losses * weights[:, positions].flatten()).sum()
            count = num_items_in_batch if num_items_in_batch is not None else (kept != IGNORED).sum()
            loss = total / torch.as_tensor(count, device=total.device).clamp(min=1)
            return (loss, outputs) if return_outputs else loss

    return LabelledPositionsTrainer


def fine_tune(
    dtype: DType,
    settings: FineTuning,
    model: Any,
    tokenizer: Any,
    examples: list[dict[str, Any]],
    on_progress: Callable[[str, int, int], None] | None,
    loss: ExampleLoss | None = None,
    token_weights: TokenWeights | None = None,
) -> list[dict[str, float]]:
    """TRL's SFTTrainer on the pre-tokenized examples of a model of `dtype` (its LoRA adapter attached), their labels
    as given (so TRL masks nothing of its own), weighed by `token_weights`; with `loss`, each example is trained by
    it (`example_loss_trainer`), one a micro-batch. Returns the logged losses by step."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
    from trl import SFTConfig, SFTTrainer

    losses: list[dict[str, float]] = []

    class Report(TrainerCallback):
        def on_log(
            self,
            args: TrainingArguments,
            state: TrainerState,
            control: TrainerControl,
            logs: dict[str, float] | None = None,
            **kwargs: Any,
        ) -> None:
            if logs and "loss" in logs:
                losses.append({"step": state.global_step, "loss": float(logs["loss"])})

        def on_step_end(
            self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
        ) -> None:
            if on_progress is not None:
                on_progress("fine-tuning steps", state.global_step, state.max_steps)

    keys = [k for k in examples[0] if k != "transcript"] if loss is not None else ["input_ids", "labels"]
    data = Dataset.from_list([{k: e[k] for k in keys} for e in examples])
    batching: dict[str, Any] = {"per_device_train_batch_size": settings.batch_size}
    if loss is not None:
        batching = {"per_device_train_batch_size": 1, "gradient_accumulation_steps": settings.batch_size,
                    "remove_unused_columns": False, "dataset_kwargs": {"skip_prepare_dataset": True}}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="sft-") as scratch:
        args = SFTConfig(
            output_dir=scratch,
            num_train_epochs=settings.epochs,
            **batching,
            learning_rate=settings.learning_rate,
            lr_scheduler_type="constant",
            max_length=None,
            save_strategy="no",
            logging_steps=1,
            report_to=[],
            disable_tqdm=True,
            seed=settings.seed,
            data_seed=settings.seed,
            dataloader_num_workers=0,
            # TRL turns it on by default; with it the backward runs through every layer (peft then needs input
            # gradients) instead of stopping below `lora.last_layers`: about 3x slower on a CPU here
            gradient_checkpointing=False,
            **precision_args(dtype),
        )
        if loss is not None:
            trainer = example_loss_trainer(SFTTrainer, loss)(
                model=model,
                args=args,
                train_dataset=data,
                processing_class=tokenizer,
                callbacks=[Report()],
                data_collator=lambda batch: batch[0] | {"input_ids": torch.tensor([batch[0]["input_ids"]])},
            )
        else:
            trainer = labelled_positions_trainer(SFTTrainer, token_weights)(
                model=model, args=args, train_dataset=data, processing_class=tokenizer, callbacks=[Report()]
            )
        trainer.train()
    model.eval()
    return losses
