"""The experiment's warm start: `auditrl sft` with the experiment's weighting, and under a report grammar every
report choice of a teacher-probed audit trained at once (choice SFT)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from auditrl.atomic import atomic_write_text
from auditrl.experiments.small_lm.curriculum import screen, shown_rows
from auditrl.experiments.small_lm.report_choices import (
    evidence_grammar,
    length_matched_weights,
    probed_audits,
    supervised_loss,
    supervised_rows,
)
from auditrl.experiments.small_lm.report_grammar import IGNORED, verdict_index, verdict_token_ids
from auditrl.experiments.small_lm.settings import small_lm
from auditrl.judges.claim_grader import default_grader
from auditrl.scaffold.store import write_transcripts
from auditrl.scaffold.transcript import Transcript
from auditrl.train.config import GRPOLMConfig
from auditrl.train.rollout import ChatSegments, EpisodeRow
from auditrl.train.sft import DATA_FILE, TEACHER_TRANSCRIPTS, SFTSettings, run_sft, teacher_summary, train_adapter


class SmallLMSFTSettings(SFTSettings):
    """The warm start's settings with the experiment's weighting of free reports and of a grammar's sentences."""

    finding_repeats: int = Field(
        default=1,
        ge=1,
        description="Times each kept audit whose report identifies the planted behavior (by the claim grader) is "
        "trained on per epoch. The scripted teacher finds something in about 1 audit of 7; a student trained on "
        "each audit once seldom opens a report with a claim, so GRPO never samples a finding to reinforce.",
    )
    verdict_weight: float = Field(
        default=1.0,
        ge=1.0,
        description="Loss weight of the report's verdict word (the `true`/`false` of no_behavior_found) against 1 "
        "for every other trained token. An audit trains ~90 tokens and one of them decides whether the report "
        "claims (benchmarks/claim_probability.py measures how a student's claims follow the evidence).",
    )
    claim_weight: float | None = Field(
        default=None,
        gt=0.0,
        description="Under a sentence report grammar (every sentence of an audit trained, auditrl.experiments."
        'small_lm.report_choices): loss weight of a claim after an evidence sentence against 1 for "nothing found" '
        "after a clean one. Default: clean sentences per evidence sentence in the data, so that both verdicts weigh "
        "the same in total (evidence is about one sentence in ten, and a student fitted to the raw ratio learns the "
        "prior, not the evidence).",
    )
    match_lengths: bool = Field(
        default=False,
        description="Under a sentence report grammar: weigh each clean sentence's verdict by its length class so "
        "that clean sentences weigh in with the evidence sentences' length distribution (auditrl.experiments."
        "small_lm.report_choices.length_matched_weights), so that a sentence's length alone does not tell a claim.",
    )


class VerdictWeighting:
    """The experiment's weighting of free reports (auditrl.train.sft.SFTWeighting): audits that identify their
    behavior repeated `finding_repeats` times, each report's verdict word weighed `verdict_weight` times."""

    def __init__(self, tokenizer: Any, finding_repeats: int, verdict_weight: float) -> None:
        self.verdicts = verdict_token_ids(tokenizer)
        self.finding_repeats = finding_repeats
        self.verdict_weight = verdict_weight
        self.grader = default_grader()

    def repeats(self, transcript: Transcript) -> int:
        return self.finding_repeats if self.grader.identifies(transcript) else 1

    def token_weights(self, labels: Sequence[int]) -> dict[int, float]:
        if self.verdict_weight == 1.0 or (i := verdict_index(labels, self.verdicts)) is None:
            return {}
        return {i: self.verdict_weight}

    def record(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        """How many examples have a verdict word the loss weighs; refuses a weight that would fall on none."""
        found = sum(verdict_index(e["labels"], self.verdicts) is not None for e in examples)
        if self.verdict_weight != 1.0 and not found:
            raise ValueError(
                f"verdict_weight {self.verdict_weight}: no trained report opens its verdict with a one-token "
                "true/false, so the weight would change nothing"
            )
        return {"verdicts": found}


def check_settings(cfg: GRPOLMConfig, settings: SmallLMSFTSettings) -> None:
    """Refuse settings that would change nothing for this config's reports: `finding_repeats` and `verdict_weight`
    weigh whole free reports, `claim_weight` the sentences of a report grammar; under a grammar the teacher only
    probes, so it must be the run's probing teacher."""
    exp = small_lm(cfg)
    if exp.report_grammar == "free" and (settings.claim_weight is not None or settings.match_lengths):
        raise ValueError(
            "claim_weight and match_lengths weigh the sentences of a report grammar; this config's reports are free "
            "(experiment.report_grammar: free)"
        )
    if exp.report_grammar != "free" and settings.teacher != exp.probing_teacher:
        raise ValueError(
            f"under experiment.report_grammar {exp.report_grammar} the teacher only probes, as GRPO's "
            f"experiment.probing_teacher ({exp.probing_teacher}) does; the teacher {settings.teacher!r} differs"
        )
    if exp.report_grammar != "free" and (settings.finding_repeats != 1 or settings.verdict_weight != 1.0):
        raise ValueError(
            f"finding_repeats and verdict_weight weigh whole free reports; under experiment.report_grammar "
            f"{exp.report_grammar} every sentence is trained and claim_weight weighs the claims"
        )


def run_experiment_sft(
    cfg: GRPOLMConfig,
    settings: SmallLMSFTSettings,
    out: Path,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """The warm start of an experiment run: choice SFT under a report grammar, else the trainer's SFT with the
    experiment's weighting."""
    from transformers import set_seed

    from auditrl.behaviors.library import load_behaviors
    from auditrl.train.episodes import training_seeds
    from auditrl.train.policy import load_policy
    from auditrl.train.sft import sft_rows

    check_settings(cfg, settings)
    if small_lm(cfg).report_grammar == "free":

        def weighting(tokenizer: Any) -> VerdictWeighting:
            return VerdictWeighting(tokenizer, settings.finding_repeats, settings.verdict_weight)

        return run_sft(cfg, settings, out, on_progress, weighting=weighting)
    out.mkdir(parents=True, exist_ok=True)
    started, cpu = time.perf_counter(), time.process_time()
    set_seed(settings.seed)
    model, tokenizer = load_policy(cfg.policy.model_copy(update={"init_adapter": None}))
    behaviors = load_behaviors(cfg.data.behavior_paths or None)
    seeds = training_seeds(cfg, behaviors)
    rows = sft_rows(cfg, settings, behaviors, seeds)
    return run_choice_sft(cfg, settings, out, model, tokenizer, behaviors, seeds, rows, (started, cpu), on_progress)


def choice_rows(
    cfg: GRPOLMConfig, segments: Any, behaviors: dict[str, Any], seeds: list[Any], rows: list[EpisodeRow]
) -> list[EpisodeRow]:
    """`rows` with the planted ones a curriculum (`experiment.planted_groups`) would not train replaced as GRPO's
    batches replace them, duplicates dropped."""
    if small_lm(cfg).planted_groups != "all":
        rows = shown_rows(cfg, rows, screen(cfg, segments, behaviors, seeds))
    return list(dict.fromkeys(rows))


def run_choice_sft(
    cfg: GRPOLMConfig,
    settings: SmallLMSFTSettings,
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
    of each evidence sentence (auditrl.experiments.small_lm.report_choices). Why: one teacher report an audit trains
    one verdict on one sentence, so a reward sees few credited claims a step."""

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
        raise ValueError(
            f"the teacher's audits hold {evidence} evidence and {clean} clean sentences; both are needed to "
            f"train a verdict (see {out / TEACHER_TRANSCRIPTS})"
        )
    claim_weight = settings.claim_weight or clean / evidence
    clean_weights = length_matched_weights([c for a in audits for c in a.choices]) if settings.match_lengths else None
    examples: list[dict[str, Any]] = []
    for audit in audits:
        ids, row_labels, weights = supervised_rows(audit, grammar, claim_weight, clean_weights)
        if ids:
            examples.append(
                {
                    "input_ids": audit.prefix,
                    "rows": ids,
                    "labels": row_labels,
                    "weights": weights,
                    "transcript": audit.transcript.id,
                }
            )
    atomic_write_text(out / DATA_FILE, "".join(json.dumps(e) + "\n" for e in examples))
    # every labelled token weighs the same wherever it is: an audit's loss over the mean total weight of an audit
    scale = sum(sum(map(sum, e["weights"])) for e in examples) / len(examples)

    def loss(model: Any, inputs: dict[str, Any]) -> Any:
        prefix = inputs["input_ids"][0].tolist()
        return (
            supervised_loss(model, prefix, inputs["rows"], inputs["labels"], inputs["weights"], segments.pad_id) / scale
        )

    return train_adapter(
        cfg,
        settings,
        out,
        model,
        tokenizer,
        examples,
        on_progress,
        clocks,
        {
            "teacher": teacher_summary([a.transcript for a in audits]),
            "sentences": {
                "evidence": evidence,
                "clean": clean,
                "unlabelled": labels.count(None),
                "claim_weight": claim_weight,
                "clean_weights_by_length": clean_weights,
            },
            "episodes": len(rows),
            "kept": len(examples),
            "examples": sum(len(e["rows"]) for e in examples),
            "tokens": {
                "total": sum(len(e["input_ids"]) + sum(len(r) for r in e["rows"]) for e in examples),
                "trained": sum(label != IGNORED for e in examples for row in e["labels"] for label in row),
                "verdicts": sum(len(e["rows"]) for e in examples),
            },
        },
        loss,
    )
