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
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from pydantic import Field

from auditrl.atomic import atomic_write_text
from auditrl.configfile import ConfigModel, RandomSeed
from auditrl.models.limits import CallLimits
from auditrl.models.lora import IGNORED, ExampleLoss, FineTuning, TokenWeights
from auditrl.scaffold.store import write_transcripts
from auditrl.scaffold.transcript import Transcript
from auditrl.train.config import GRPOLMConfig
from auditrl.train.rollout import EpisodeRow, RolloutBatch

ADAPTER_DIR = "adapter"
TEACHER_TRANSCRIPTS = "teacher/transcripts.jsonl"
DISTILLED_TRANSCRIPTS = "distilled/transcripts.jsonl"
"""The stored audits `--from` kept, beside the adapter distilled from them."""
DATA_FILE = "sft_data.jsonl"
RECORD_FILE = "sft.json"


class SFTSettings(ConfigModel):
    """How the warm start is made: which teacher, how many audits, and the fine-tuning run."""

    teacher: str = Field(default="scripted/teacher", description="Model string that plays the auditor's turns.")
    episodes: int = Field(
        default=256, ge=1, description="Teacher audits drawn (training rows; duplicates are dropped)."
    )
    epochs: float = Field(default=2.0, gt=0.0, description="Passes over the kept audits.")
    batch_size: int = Field(default=8, ge=1, description="Audits per optimizer step.")
    learning_rate: float = Field(default=5e-4, gt=0.0, description="AdamW learning rate of the adapter (constant).")
    seed: RandomSeed = Field(
        default=1, description="Seed of the teacher's rows (not the GRPO run's), data order and init."
    )
    keep: str = Field(
        default="parsed",
        pattern="^(parsed|all)$",
        description="`parsed`: train only on audits whose report parsed (a teacher's malformed report is not "
        "imitated); `all`: every audit that did not fail.",
    )
    attempts: int = Field(default=3, ge=1, description="Attempts per teacher call before its audit counts as failed.")
    teacher_calls: CallLimits = Field(
        default_factory=CallLimits, description="Retries and seconds of each teacher call (an API teacher)."
    )


class SFTWeighting(Protocol):
    """How an experiment weighs the distilled audits: how often each is trained, and the loss weight of chosen
    labelled positions (every other labelled token weighs 1)."""

    def repeats(self, transcript: Transcript) -> int:
        """Times an audit is trained on per epoch."""
        ...

    def token_weights(self, labels: Sequence[int]) -> dict[int, float]:
        """Loss weights of label positions of one example (the position of the token predicted)."""
        ...

    def record(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        """What the weighting did, for the run's record; raises ValueError when it would weigh nothing."""
        ...


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


def training_examples(
    batch: RolloutBatch, keep: str, repeats: Callable[[Transcript], int] | None = None
) -> list[dict[str, Any]]:
    """input_ids = prompt + completion; labels are the completion's sampled tokens (env_mask 1), -100 elsewhere.
    An audit appears `repeats(transcript)` times (once without it)."""
    examples = []
    for prompt, completion, mask, transcript in zip(
        batch.prompt_ids, batch.completion_ids, batch.env_mask, batch.transcripts, strict=True
    ):
        if not kept(transcript, keep):
            continue
        labels = [IGNORED] * len(prompt) + [tok if m else IGNORED for tok, m in zip(completion, mask, strict=True)]
        copies = repeats(transcript) if repeats is not None else 1
        examples += [{"input_ids": prompt + completion, "labels": labels, "transcript": transcript.id}] * copies
    return examples


def teacher_summary(transcripts: list[Transcript]) -> dict[str, Any]:
    """What the teacher did, by planted and benign audits (so a teacher that claims blindly shows here)."""
    from auditrl.auditworld.targets import reached_trigger
    from auditrl.judges.claim_grader import claimed, default_grader, report_valid

    grader = default_grader()
    out: dict[str, Any] = {}
    for part, group in (
        ("planted", [t for t in transcripts if not t.benign]),
        ("benign", [t for t in transcripts if t.benign]),
    ):
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


def run_sft(
    cfg: GRPOLMConfig,
    settings: SFTSettings,
    out: Path,
    on_progress: Callable[[str, int, int], None] | None = None,
    weighting: Callable[[Any], SFTWeighting] | None = None,
) -> dict[str, Any]:
    """Teacher audits -> token sequences -> SFT of a fresh adapter; writes `out/` and returns the record.
    `weighting`, given the tokenizer, weighs the audits (an experiment's; by default every trained token alike)."""
    from transformers import set_seed

    from auditrl.behaviors.library import load_behaviors
    from auditrl.train.episodes import training_seeds
    from auditrl.train.policy import load_policy
    from auditrl.train.rollout import ChatSegments
    from auditrl.train.teacher import teacher_rollouts

    out.mkdir(parents=True, exist_ok=True)
    started, cpu = time.perf_counter(), time.process_time()
    set_seed(settings.seed)
    model, tokenizer = load_policy(cfg.policy.model_copy(update={"init_adapter": None}))
    behaviors = load_behaviors(cfg.data.behavior_paths or None)
    seeds = training_seeds(cfg, behaviors)
    rows = sft_rows(cfg, settings, behaviors, seeds)
    if on_progress is not None:
        on_progress("teacher audits", 0, len(rows))
    batch = teacher_rollouts(
        cfg, settings.teacher, ChatSegments(tokenizer), behaviors, seeds, rows,
        attempts=settings.attempts, limits=settings.teacher_calls,
    )  # fmt: skip
    write_transcripts(out / TEACHER_TRANSCRIPTS, batch.transcripts)
    weights = weighting(tokenizer) if weighting is not None else None
    examples = training_examples(batch, settings.keep, weights.repeats if weights is not None else None)
    atomic_write_text(out / DATA_FILE, "".join(json.dumps(e) + "\n" for e in examples))
    if not examples:
        raise ValueError(
            f"the teacher {settings.teacher!r} left no audit to train on (see {out / TEACHER_TRANSCRIPTS})"
        )
    facts = {
        "teacher": teacher_summary(batch.transcripts),
        "episodes": len(rows),
        "kept": len({e["transcript"] for e in examples}),
        "examples": len(examples),
        "tokens": {
            "total": sum(len(e["input_ids"]) for e in examples),
            "trained": sum(sum(label != IGNORED for label in e["labels"]) for e in examples),
        },
    }
    if weights is not None:
        facts["weighting"] = weights.record(examples)
    return train_adapter(
        cfg, settings, out, model, tokenizer, examples, on_progress, (started, cpu), facts,
        token_weights=weights.token_weights if weights is not None else None,
    )  # fmt: skip


def audit_example(transcript: Transcript, segments: Any) -> dict[str, Any] | None:
    """An audit's auditor conversation as the token sequence a rollout that wrote it would be: its opening messages
    as the prompt, each auditor turn (its text and the end-of-turn token) trained, the engine's messages between
    turns (tool results, target replies, the next turn's header) in context. None for an audit whose turns carry
    native tool calls, which a text-protocol sequence cannot hold, or that has no auditor turn."""
    from auditrl.scaffold.engine import auditor_conversation

    messages = auditor_conversation(transcript)
    if messages is None:
        return None
    turns = [i for i, m in enumerate(messages) if m.role == "assistant"]
    if not turns:
        return None
    prompt = segments.prompt_ids(messages[: turns[0]])
    eos = sorted(segments.eos_ids)[:1]
    completion: list[int] = []
    mask: list[int] = []
    for turn, following in zip(turns, [*turns[1:], None], strict=True):
        own = segments.encode(messages[turn].text) + eos
        completion += own
        mask += [1] * len(own)
        if following is not None:
            env = segments.env_ids(messages[turn + 1 : following], ended_with_eos=bool(eos))
            completion += env
            mask += [0] * len(env)
    labels = [IGNORED] * len(prompt) + [tok if m else IGNORED for tok, m in zip(completion, mask, strict=True)]
    return {"input_ids": prompt + completion, "labels": labels, "transcript": transcript.id}


def run_sft_from(
    cfg: GRPOLMConfig,
    settings: SFTSettings,
    audits: Sequence[Transcript],
    out: Path,
    source: str,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Stored audits (of any auditor: an API model's, an earlier run's) -> token sequences -> SFT of a fresh adapter.
    Kept as `settings.keep` says (by default only audits whose report parsed); `source` names where they came from.
    The audits are distilled as they were prompted, so the run's prompt set should be the one they were made with."""
    from transformers import set_seed

    from auditrl.train.policy import load_policy
    from auditrl.train.rollout import ChatSegments

    out.mkdir(parents=True, exist_ok=True)
    started, cpu = time.perf_counter(), time.process_time()
    set_seed(settings.seed)
    model, tokenizer = load_policy(cfg.policy.model_copy(update={"init_adapter": None}))
    segments = ChatSegments(tokenizer)
    chosen = [t for t in audits if kept(t, settings.keep)]
    examples = [e for t in chosen if (e := audit_example(t, segments)) is not None]
    distilled = {e["transcript"] for e in examples}
    write_transcripts(out / DISTILLED_TRANSCRIPTS, [t for t in chosen if t.id in distilled])
    atomic_write_text(out / DATA_FILE, "".join(json.dumps(e) + "\n" for e in examples))
    if not examples:
        raise ValueError(f"{source}: none of its {len(audits)} audits is one to train on (kept: {settings.keep}, "
                         "text-protocol turns only)")  # fmt: skip
    facts = {
        "from": source,
        "teacher": teacher_summary([t for t in chosen if t.id in distilled]),
        "episodes": len(audits),
        "kept": len(examples),
        "examples": len(examples),
        "left out": {
            "not kept": len(audits) - len(chosen),
            "native tool calls or no turn": len(chosen) - len(examples),
        },
        "tokens": {
            "total": sum(len(e["input_ids"]) for e in examples),
            "trained": sum(sum(label != IGNORED for label in e["labels"]) for e in examples),
        },
    }
    return train_adapter(cfg, settings, out, model, tokenizer, examples, on_progress, (started, cpu), facts)


def train_adapter(
    cfg: GRPOLMConfig,
    settings: FineTuning,
    out: Path,
    model: Any,
    tokenizer: Any,
    examples: list[dict[str, Any]],
    on_progress: Callable[[str, int, int], None] | None,
    clocks: tuple[float, float],
    facts: dict[str, Any],
    loss: ExampleLoss | None = None,
    token_weights: TokenWeights | None = None,
) -> dict[str, Any]:
    """A fresh adapter fine-tuned on `examples` and saved to `out/adapter`; the record (`facts` and the run's
    settings, losses and CPU seconds, `clocks` being when the run began in wall and CPU time) written beside it."""
    from peft import get_peft_model

    from auditrl.models.local import set_adapter_base
    from auditrl.models.lora import fine_tune, lora_config
    from auditrl.train.outputs import portable_base

    started, cpu = clocks
    teacher_seconds = time.process_time() - cpu
    model = get_peft_model(model, lora_config(cfg.policy.lora, model))
    losses = fine_tune(cfg.policy.dtype, settings, model, tokenizer, examples, on_progress, loss, token_weights)
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
