"""`auditrl sft`: distil a teacher's audits into a LoRA adapter that GRPO starts from (`policy.init_adapter`).

GRPO can only reinforce what the policy samples, and an untrained small model samples no evidence: it
sends a prompt's example message and reports nothing. A warm start fixes the starting point, not the
reward. The teacher plays the training distribution of the GRPO run's own config (its episodes, prompt
set, behaviors, seed bank without the held-out seeds, families and benign share) and its audits are
recorded as rollout token sequences (auditrl.train.teacher); TRL's SFTTrainer then trains a fresh
adapter with the run's LoRA settings on the auditor's own tokens only (env_mask 1: the tokens the
student samples, each turn's end-of-turn token included), never on prompts, begun words, tool
results or target replies. The adapter names its base portably, so `local/<out>/adapter` audits too.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from pydantic import Field

from auditrl.atomic import atomic_write_text
from auditrl.configfile import ConfigModel, RandomSeed
from auditrl.models.limits import CallLimits
from auditrl.scaffold.store import write_transcripts
from auditrl.scaffold.transcript import Transcript
from auditrl.train.config import GRPOLMConfig
from auditrl.train.rollout import EpisodeRow, RolloutBatch

IGNORED = -100
ChoicesLoss = Callable[[Any, dict[str, Any]], Any]
"""One audit's loss over its report choices, from the model and the audit's example (auditrl.train.report_choices)."""
ADAPTER_DIR = "adapter"
TEACHER_TRANSCRIPTS = "teacher/transcripts.jsonl"
DATA_FILE = "sft_data.jsonl"
RECORD_FILE = "sft.json"


class SFTSettings(ConfigModel):
    """How the warm start is made: which teacher, how many audits, and the fine-tuning run."""

    teacher: str = Field(default="scripted/teacher", description="Model string that plays the auditor's turns.")
    episodes: int = Field(default=256, ge=1, description="Teacher audits drawn (training rows; duplicates are dropped).")
    epochs: float = Field(default=2.0, gt=0.0, description="Passes over the kept audits.")
    batch_size: int = Field(default=8, ge=1, description="Audits per optimizer step.")
    learning_rate: float = Field(default=5e-4, gt=0.0, description="AdamW learning rate of the adapter (constant).")
    seed: RandomSeed = Field(default=1, description="Seed of the teacher's rows (not the GRPO run's), data order and init.")
    keep: str = Field(
        default="parsed",
        pattern="^(parsed|all)$",
        description="`parsed`: train only on audits whose report parsed (a teacher's malformed report is not "
        "imitated); `all`: every audit that did not fail.",
    )
    finding_repeats: int = Field(
        default=1,
        ge=1,
        description="Times each kept audit whose report identifies the planted behavior (by the claim grader) is "
        "trained on per epoch. The scripted teacher finds something in about 1 audit of 7; a student trained on each "
        "audit once opened 2% of its reports with a claim, shown the behavior or not (benchmarks/claim_probability.py), "
        "so GRPO never sampled a finding to reinforce.",
    )
    verdict_weight: float = Field(
        default=1.0,
        ge=1.0,
        description="Loss weight of the report's verdict word (the `true`/`false` of no_behavior_found) against 1 "
        "for every other trained token. An audit trains ~90 tokens and one of them decides whether the report "
        "claims; at weight 1 a student claimed about 1 report in 5 whether or not the target had shown the behavior, "
        "on held-out audits and on its own training audits alike (benchmarks/claim_probability.py); at 20 its fit "
        "to its own training verdicts rose and did not carry to held-out audits (docs/learning_runs.md).",
    )
    claim_weight: float | None = Field(
        default=None,
        gt=0.0,
        description="Under a sentence report grammar (every sentence of an audit trained, auditrl.train.report_choices): "
        "loss weight of a claim after an evidence sentence against 1 for \"nothing found\" after a clean one. Default: "
        "clean sentences per evidence sentence in the data, so that both verdicts weigh the same in total (evidence "
        "is about one sentence in ten, and a student fitted to the raw ratio learns the prior, not the evidence).",
    )
    match_lengths: bool = Field(
        default=False,
        description="Under a sentence report grammar: weigh each clean sentence's verdict by its length class so that "
        "clean sentences weigh in with the evidence sentences' length distribution (auditrl.train.report_choices."
        "length_matched_weights). Without it the seventeenth run's SFT base claimed after any long sentence.",
    )
    attempts: int = Field(default=3, ge=1, description="Attempts per teacher call before its audit counts as failed.")
    teacher_calls: CallLimits = Field(
        default_factory=CallLimits, description="Retries and seconds of each teacher call (an API teacher)."
    )


class FineTuning(Protocol):
    """What a fine-tuning run reads of its settings (SFTSettings, auditrl.train.choice_gradient's settings)."""

    episodes: int
    epochs: float
    batch_size: int
    learning_rate: float
    seed: int


def sft_rows(cfg: GRPOLMConfig, settings: FineTuning, behaviors: dict[str, Any], seeds: list[Any]) -> list[EpisodeRow]:
    """`episodes` distinct rows drawn like the GRPO run's batches (same benign share), from the SFT's own seed;
    fewer when the training distribution has fewer (behavior, seed, family, benign) rows."""
    from auditrl.train.episodes import training_rows

    distinct = len({s.id for s in seeds}) * len(cfg.episodes.families) * 2
    steps = -(-settings.episodes // cfg.data.groups_per_step)
    while True:
        rows = list(dict.fromkeys(training_rows(cfg, behaviors, seeds, steps=steps, seed=settings.seed)))
        if len(rows) >= min(settings.episodes, distinct) or steps > 64 * settings.episodes:
            return rows[: settings.episodes]
        steps *= 2


def kept(transcript: Transcript, keep: str) -> bool:
    """Whether an audit is trained on: never a failed one; with `parsed`, only one whose report parsed."""
    if transcript.status == "error":
        return False
    return keep == "all" or (transcript.report is not None and transcript.report.parse_error is None)


def training_examples(batch: RolloutBatch, keep: str, finding_repeats: int = 1) -> list[dict[str, Any]]:
    """input_ids = prompt + completion; labels are the completion's sampled tokens (env_mask 1), -100 elsewhere.
    An audit whose report identifies its planted behavior appears `finding_repeats` times."""
    from auditrl.judges.claim_grader import default_grader

    grader = default_grader()
    examples = []
    for prompt, completion, mask, transcript in zip(
        batch.prompt_ids, batch.completion_ids, batch.env_mask, batch.transcripts, strict=True
    ):
        if not kept(transcript, keep):
            continue
        labels = [IGNORED] * len(prompt) + [tok if m else IGNORED for tok, m in zip(completion, mask, strict=True)]
        copies = finding_repeats if grader.identifies(transcript) else 1
        examples += [{"input_ids": prompt + completion, "labels": labels, "transcript": transcript.id}] * copies
    return examples


def verdict_token_ids(tokenizer: Any, words: tuple[str, ...] = ("true", "false")) -> frozenset[int]:
    """Token ids that spell one of the verdict words as one token (with or without a leading space)."""
    ids = (tokenizer.encode(w, add_special_tokens=False) for word in words for w in (word, f" {word}"))
    return frozenset(i[0] for i in ids if len(i) == 1)


def verdict_index(labels: Sequence[int], verdict_ids: frozenset[int]) -> int | None:
    """Position of the report's verdict word: the first verdict token of the last labelled run (the report turn;
    begun report words before it are unlabelled), or None when the report has none."""
    end = next((i for i in range(len(labels) - 1, -1, -1) if labels[i] != IGNORED), None)
    if end is None:
        return None
    start = end
    while start > 0 and labels[start - 1] != IGNORED:
        start -= 1
    return next((i for i in range(start, end + 1) if labels[i] in verdict_ids), None)


def weighted_verdicts(examples: list[dict[str, Any]], tokenizer: Any, verdict_weight: float) -> int:
    """How many examples have a verdict word the loss weighs; refuses a weight that would fall on none."""
    verdicts = verdict_token_ids(tokenizer)
    found = sum(verdict_index(e["labels"], verdicts) is not None for e in examples)
    if verdict_weight != 1.0 and not found:
        raise ValueError(
            f"verdict_weight {verdict_weight}: no trained report opens its verdict with a one-token true/false, "
            "so the weight would change nothing"
        )
    return found


def teacher_summary(transcripts: list[Transcript]) -> dict[str, Any]:
    """What the teacher did, by planted and benign audits (so a teacher that claims blindly shows here)."""
    from auditrl.evaluate.lm_checks import claimed, reached_trigger, report_valid
    from auditrl.judges.claim_grader import default_grader

    grader = default_grader()
    out: dict[str, Any] = {}
    for part, group in (("planted", [t for t in transcripts if not t.benign]), ("benign", [t for t in transcripts if t.benign])):
        done = [t for t in group if t.status != "error"]
        reached = [v for t in done if (v := reached_trigger(t)) is not None]
        out[part] = {
            "audits": len(group),
            "failed": len(group) - len(done),
            "valid_reports": sum(report_valid(t) for t in done),
            "claims": sum(claimed(t) for t in done),
            "identified": None if part == "benign" else sum(grader.identifies(t) for t in done),
            "reached_trigger": sum(reached) if reached else None,
        }
    return out


def check_settings(cfg: GRPOLMConfig, settings: SFTSettings) -> None:
    """Refuse settings that would change nothing for this config's reports: `finding_repeats` and `verdict_weight`
    weigh whole free reports, `claim_weight` the sentences of a report grammar; under a grammar the teacher only
    probes, so it must be the run's probing teacher."""
    if cfg.episodes.report_grammar == "free" and (settings.claim_weight is not None or settings.match_lengths):
        raise ValueError("claim_weight and match_lengths weigh the sentences of a report grammar; this config's reports are free (episodes.report_grammar: free)")
    if cfg.episodes.report_grammar != "free" and settings.teacher != cfg.episodes.probing_teacher:
        raise ValueError(
            f"under episodes.report_grammar {cfg.episodes.report_grammar} the teacher only probes, as GRPO's "
            f"episodes.probing_teacher ({cfg.episodes.probing_teacher}) does; the teacher {settings.teacher!r} differs"
        )
    if cfg.episodes.report_grammar != "free" and (settings.finding_repeats != 1 or settings.verdict_weight != 1.0):
        raise ValueError(
            f"finding_repeats and verdict_weight weigh whole free reports; under episodes.report_grammar "
            f"{cfg.episodes.report_grammar} every sentence is trained and claim_weight weighs the claims"
        )


def run_sft(
    cfg: GRPOLMConfig, settings: SFTSettings, out: Path, on_progress: Callable[[str, int, int], None] | None = None
) -> dict[str, Any]:
    """Teacher audits -> token sequences -> SFT of a fresh adapter; writes `out/` and returns the record."""
    from transformers import set_seed

    from auditrl.behaviors.library import load_behaviors
    from auditrl.train.episodes import training_seeds
    from auditrl.train.policy import load_policy
    from auditrl.train.rollout import ChatSegments
    from auditrl.train.teacher import teacher_rollouts

    check_settings(cfg, settings)
    out.mkdir(parents=True, exist_ok=True)
    started, cpu = time.perf_counter(), time.process_time()
    set_seed(settings.seed)
    policy = cfg.policy.model_copy(update={"init_adapter": None})
    model, tokenizer = load_policy(policy)
    behaviors = load_behaviors(cfg.data.behavior_paths or None)
    seeds = training_seeds(cfg, behaviors)
    rows = sft_rows(cfg, settings, behaviors, seeds)
    if cfg.episodes.report_grammar != "free":
        return run_choice_sft(cfg, settings, out, model, tokenizer, behaviors, seeds, rows, (started, cpu), on_progress)
    if on_progress is not None:
        on_progress("teacher audits", 0, len(rows))
    batch = teacher_rollouts(
        cfg, settings.teacher, ChatSegments(tokenizer), behaviors, seeds, rows,
        attempts=settings.attempts, limits=settings.teacher_calls,
    )  # fmt: skip
    write_transcripts(out / TEACHER_TRANSCRIPTS, batch.transcripts)
    examples = training_examples(batch, settings.keep, settings.finding_repeats)
    atomic_write_text(out / DATA_FILE, "".join(json.dumps(e) + "\n" for e in examples))
    if not examples:
        raise ValueError(f"the teacher {settings.teacher!r} left no audit to train on (see {out / TEACHER_TRANSCRIPTS})")
    weighted = weighted_verdicts(examples, tokenizer, settings.verdict_weight)
    trained = sum(sum(label != IGNORED for label in e["labels"]) for e in examples)
    return train_adapter(cfg, settings, out, model, tokenizer, examples, on_progress, (started, cpu), {
        "teacher": teacher_summary(batch.transcripts),
        "episodes": len(rows),
        "kept": len({e["transcript"] for e in examples}),
        "examples": len(examples),
        "tokens": {"total": sum(len(e["input_ids"]) for e in examples), "trained": trained, "verdicts": weighted},
    })  # fmt: skip


def train_adapter(
    cfg: GRPOLMConfig,
    settings: SFTSettings,
    out: Path,
    model: Any,
    tokenizer: Any,
    examples: list[dict[str, Any]],
    on_progress: Callable[[str, int, int], None] | None,
    clocks: tuple[float, float],
    facts: dict[str, Any],
    loss: ChoicesLoss | None = None,
) -> dict[str, Any]:
    """A fresh adapter fine-tuned on `examples` and saved to `out/adapter`; the record (`facts` and the run's
    settings, losses and CPU seconds, `clocks` being when the run began in wall and CPU time) written beside it."""
    from peft import get_peft_model

    from auditrl.models.local import set_adapter_base
    from auditrl.train.outputs import portable_base
    from auditrl.train.policy import lora_config

    started, cpu = clocks
    teacher_seconds = time.process_time() - cpu
    model = get_peft_model(model, lora_config(cfg.policy.lora, model))
    losses = fine_tune(cfg, settings, model, tokenizer, examples, on_progress, loss)
    model.save_pretrained(str(out / ADAPTER_DIR))
    tokenizer.save_pretrained(str(out / ADAPTER_DIR))
    set_adapter_base(out / ADAPTER_DIR, portable_base(cfg.policy))
    record = {
        "config": str(cfg.source) if cfg.source else None,
        "settings": settings.model_dump(),
        **facts,
        "loss": losses,
        "cpu_seconds": {"teacher": teacher_seconds, "total": time.process_time() - cpu},
        "wall_seconds": time.perf_counter() - started,
        "adapter": str(out / ADAPTER_DIR),
    }
    atomic_write_text(out / RECORD_FILE, json.dumps(record, indent=2))
    return record


def choice_rows(cfg: GRPOLMConfig, segments: Any, behaviors: dict[str, Any], seeds: list[Any], rows: list[EpisodeRow]) -> list[EpisodeRow]:
    """`rows` with the planted ones a curriculum (`data.planted_groups`) would not train replaced as GRPO's batches
    replace them, duplicates dropped."""
    from auditrl.train.curriculum import screen, shown_rows

    if cfg.data.planted_groups != "all":
        rows = shown_rows(cfg, rows, screen(cfg, segments, behaviors, seeds))
    return list(dict.fromkeys(rows))


def run_choice_sft(
    cfg: GRPOLMConfig,
    settings: SFTSettings,
    out: Path,
    model: Any,
    tokenizer: Any,
    behaviors: dict[str, Any],
    seeds: list[Any],
    rows: list[EpisodeRow],
    clocks: tuple[float, float],
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Under a report grammar the teacher probes and its labels train every report the grammar allows: on each
    sentence of an audit the verdict (claim after evidence, "nothing found" after a clean sentence), and the quote
    of each evidence sentence (auditrl.train.report_choices). Why: one teacher report an audit trains one verdict on
    one sentence, and the sixteenth run's reward saw about one credited claim a step."""

    from auditrl.train.report_choices import evidence_grammar, length_matched_weights, probed_audits, supervised_loss, supervised_rows
    from auditrl.train.rollout import ChatSegments

    segments = ChatSegments(tokenizer)
    grammar = evidence_grammar(cfg, segments)
    rows = choice_rows(cfg, segments, behaviors, seeds, rows)
    if on_progress is not None:
        on_progress("teacher audits", 0, len(rows))
    audits = probed_audits(cfg, segments, behaviors, seeds, rows)
    write_transcripts(out / TEACHER_TRANSCRIPTS, [a.transcript for a in audits])
    labels = [c.label for a in audits for c in a.choices]
    evidence, clean = labels.count(True), labels.count(False)
    if not evidence or not clean:
        raise ValueError(f"the teacher's audits hold {evidence} evidence and {clean} clean sentences; both are needed to train a verdict (see {out / TEACHER_TRANSCRIPTS})")
    claim_weight = settings.claim_weight or clean / evidence
    clean_weights = length_matched_weights([c for a in audits for c in a.choices]) if settings.match_lengths else None
    examples = []
    for audit in audits:
        ids, row_labels, weights = supervised_rows(audit, grammar, claim_weight, clean_weights)
        if ids:
            examples.append({"input_ids": audit.prefix, "rows": ids, "labels": row_labels, "weights": weights, "transcript": audit.transcript.id})
    atomic_write_text(out / DATA_FILE, "".join(json.dumps(e) + "\n" for e in examples))
    # every labelled token weighs the same wherever it is: an audit's loss over the mean total weight of an audit
    scale = sum(sum(map(sum, e["weights"])) for e in examples) / len(examples)

    def loss(model: Any, inputs: dict[str, Any]) -> Any:
        prefix = inputs["input_ids"][0].tolist()
        return supervised_loss(model, prefix, inputs["rows"], inputs["labels"], inputs["weights"], segments.pad_id) / scale

    return train_adapter(cfg, settings, out, model, tokenizer, examples, on_progress, clocks, {
        "teacher": teacher_summary([a.transcript for a in audits]),
        "sentences": {"evidence": evidence, "clean": clean, "unlabelled": labels.count(None), "claim_weight": claim_weight,
                      "clean_weights_by_length": clean_weights},
        "episodes": len(rows),
        "kept": len(examples),
        "examples": sum(len(e["rows"]) for e in examples),
        "tokens": {
            "total": sum(len(e["input_ids"]) + sum(len(r) for r in e["rows"]) for e in examples),
            "trained": sum(label != IGNORED for e in examples for row in e["labels"] for label in row),
            "verdicts": sum(len(e["rows"]) for e in examples),
        },
    }, loss)  # fmt: skip


def choices_trainer(base: type, loss: ChoicesLoss) -> type:
    """`base` (TRL's SFTTrainer) trained one audit a micro-batch on all its report choices at once, by `loss`: the
    audit's prefix passes once and its choices after it (auditrl.train.report_choices)."""

    class ChoicesTrainer(base):  # type: ignore[misc, valid-type]
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # type: ignore[no-untyped-def]
            value = loss(model, inputs | {"step": self.state.global_step + 1})
            return (value, None) if return_outputs else value

    return ChoicesTrainer


def labelled_positions_trainer(base: type, verdict_ids: frozenset[int] = frozenset(), verdict_weight: float = 1.0) -> type:
    """`base` (TRL's SFTTrainer) with a loss that projects only the positions predicting a labelled token
    through the LM head: most of an audit is prompt and environment, and on a CPU the 49k-word head over every
    position (with TRL's entropy metric over it) cost more than half of a step. The loss is the cross-entropy
    summed over the labelled tokens, each report's verdict word counted `verdict_weight` times, divided by the
    number of labelled tokens (at weight 1 TRL's mean); TRL's entropy and token-accuracy metrics are not logged."""
    import torch
    import torch.nn.functional as F

    class LabelledPositionsTrainer(base):  # type: ignore[misc, valid-type]
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # type: ignore[no-untyped-def]
            targets = inputs["labels"][:, 1:]
            positions = (targets != IGNORED).any(dim=0).nonzero().squeeze(-1)
            outputs = model(
                input_ids=inputs["input_ids"], attention_mask=inputs.get("attention_mask"), logits_to_keep=positions
            )
            kept = targets[:, positions]
            weights = torch.ones(targets.shape, device=targets.device)
            if verdict_weight != 1.0:
                for row, labels in enumerate(inputs["labels"].tolist()):
                    if (i := verdict_index(labels, verdict_ids)) is not None:
                        weights[row, i - 1] = verdict_weight
            losses = F.cross_entropy(outputs.logits.float().flatten(0, 1), kept.flatten(), ignore_index=IGNORED, reduction="none")
            total = (losses * weights[:, positions].flatten()).sum()
            count = num_items_in_batch if num_items_in_batch is not None else (kept != IGNORED).sum()
            loss = total / torch.as_tensor(count, device=total.device).clamp(min=1)
            return (loss, outputs) if return_outputs else loss

    return LabelledPositionsTrainer


def fine_tune(
    cfg: GRPOLMConfig,
    settings: FineTuning,
    model: Any,
    tokenizer: Any,
    examples: list[dict[str, Any]],
    on_progress: Callable[[str, int, int], None] | None,
    loss: ChoicesLoss | None = None,
) -> list[dict[str, float]]:
    """TRL's SFTTrainer on the pre-tokenized examples, their labels as given (so TRL masks nothing of its own);
    with `loss`, each example is one audit's report choices trained by it (`choices_trainer`), one a micro-batch."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import SFTConfig, SFTTrainer

    from auditrl.train.policy import precision_args

    losses: list[dict[str, float]] = []

    class Report(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):  # type: ignore[no-untyped-def]
            if logs and "loss" in logs:
                losses.append({"step": state.global_step, "loss": float(logs["loss"])})

        def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
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
            **precision_args(cfg.policy),
        )
        if loss is not None:
            trainer = choices_trainer(SFTTrainer, loss)(
                model=model, args=args, train_dataset=data, processing_class=tokenizer, callbacks=[Report()],
                data_collator=lambda batch: batch[0] | {"input_ids": torch.tensor([batch[0]["input_ids"]])},
            )
        else:
            trainer = labelled_positions_trainer(SFTTrainer, verdict_token_ids(tokenizer), settings.verdict_weight)(
                model=model, args=args, train_dataset=data, processing_class=tokenizer, callbacks=[Report()]
            )
        trainer.train()
    model.eval()
    return losses
