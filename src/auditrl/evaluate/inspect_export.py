"""Export transcripts as an Inspect eval log, so `inspect view` can browse audits and auditrl can read them back.

One sample per transcript. Sample ids name the behavior and seed (`flattery:flattery-03`, `benign:...`) and
the epoch is the rollout, as in a log of the `auditrl/audit` task; the log is named after the command that
made the audits (`auditrl/audit`, `auditrl/transfer`, `auditrl/suite`, `auditrl/train`) and records the
auditor and target as `model_roles`. The sample's messages are the target's conversation (its current
branch, as Petri 3 shows it), its events one model call per auditor turn and target reply, its output the
final report, and its scores the readable ones of `inspect_scores`. The whole transcript goes into the
sample's store under `TRANSCRIPT_KEY`, so `auditrl.scaffold.inspect_import` reads it back without loss.
A run has one log with a fixed name, so exporting it again replaces the log rather than adding a duplicate
that `inspect view` would list as a second run.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalError,
    EvalLog,
    EvalMetric,
    EvalResults,
    EvalSample,
    EvalScore,
    EvalSpec,
    EvalStats,
    write_eval_log,
)
from inspect_ai.model import GenerateConfig, ModelConfig, ModelOutput, ModelUsage

from auditrl.evaluate.inspect_scores import METRIC_DIGITS, REWARD_DIGITS, inspect_scores
from auditrl.scaffold.inspect_chat import audit_events, target_chat
from auditrl.scaffold.inspect_import import TRANSCRIPT_KEY
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import ROLLOUT, STEP, SUITE_PART, TARGET_PREFILL
from auditrl.scaffold.transfer import TRANSFER_SEED_ID

"""Store key of the whole transcript in each sample (written by exports and by the auditrl/audit task)."""
LOG_SUFFIXES = (".eval", ".json")


def task_name(transcripts: Sequence[Transcript]) -> str:
    """The Inspect task name of the command that made these audits."""
    if all(t.seed_id == TRANSFER_SEED_ID for t in transcripts):
        return "auditrl/transfer"
    if any(SUITE_PART in t.metadata for t in transcripts):
        return "auditrl/suite"
    if any(STEP in t.metadata for t in transcripts):  # written by the trainer's reward step
        return "auditrl/train"
    return "auditrl/audit"


def sample_id(t: Transcript, target: bool = False) -> str:
    """A readable sample id: behavior (or `benign`) and seed, and the target model where a log has several."""
    base = f"{t.behavior_id or 'benign'}:{t.seed_id}"
    return f"{base}@{t.target_model}" if target else base


def _sample(transcript: Transcript, sample: str, epoch: int) -> EvalSample:
    """One Inspect sample for one audit; everything Inspect has no field for goes to metadata and store."""
    report = transcript.report
    output_text = report.model_dump_json(indent=2) if report is not None else (transcript.error or "")
    return EvalSample(
        id=sample,
        epoch=epoch,
        input=transcript.seed_instructions,
        target=transcript.behavior_id or "benign",
        messages=target_chat(transcript),
        output=ModelOutput.from_content(model=transcript.auditor_model, content=output_text),
        scores=inspect_scores(transcript) or None,
        metadata={
            "transcript_id": transcript.id,
            "behavior_id": transcript.behavior_id,
            "benign": transcript.benign,
            "seed_id": transcript.seed_id,
            "auditor_model": transcript.auditor_model,
            "target_model": transcript.target_model,
            "target_family": transcript.target_family,
            "tool_set": transcript.tool_set,
            "status": transcript.status,
            "error": transcript.error,
            "turns_used": transcript.turns_used,
            "auditor_tokens": transcript.auditor_tokens,
            "report": report.model_dump(mode="json") if report is not None else None,
            "unverified_quotes": report.unverified_quotes if report is not None else 0,
            "target_system_prompt": transcript.target_system_prompt,
            "target_tools": [t.model_dump(mode="json") for t in transcript.target_tools],
            TARGET_PREFILL: transcript.metadata.get(TARGET_PREFILL),
            "prefill_modes": dict(Counter(m.prefill_mode for m in transcript.target_messages if m.prefill_mode)),
            "branches": len(transcript.leaves()),
        },
        store={TRANSCRIPT_KEY: transcript.model_dump(mode="json")},
        events=audit_events(transcript),
        started_at=_utc(transcript.created).isoformat(),
        model_usage={transcript.auditor_model: _auditor_usage([transcript])},
        error=EvalError(message=transcript.error or "audit failed", traceback="", traceback_ansi="")
        if transcript.status == "error"
        else None,
    )


def samples_of(transcripts: Sequence[Transcript]) -> list[EvalSample]:
    """The samples of a log: a readable id per (behavior, seed[, target]) and the rollouts of each as epochs 1, 2,
    ..."""
    by_target = len({t.target_model for t in transcripts}) > 1
    order = sorted(range(len(transcripts)), key=lambda i: (_rollout(transcripts[i]), _utc(transcripts[i].created), i))
    epochs: Counter[str] = Counter()
    samples: list[EvalSample | None] = [None] * len(transcripts)
    for i in order:
        key = sample_id(transcripts[i], by_target)
        epochs[key] += 1
        samples[i] = _sample(transcripts[i], key, epochs[key])
    return [s for s in samples if s is not None]


def _rollout(t: Transcript) -> int:
    rollout = t.metadata.get(ROLLOUT)
    return rollout if isinstance(rollout, int) and not isinstance(rollout, bool) else 0


def _utc(moment: datetime) -> datetime:
    """`moment` in UTC; a naive time (from hand-written JSONL) is taken to be UTC already."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _auditor_usage(transcripts: Sequence[Transcript]) -> ModelUsage:
    """Auditor output tokens, the one usage figure a transcript records."""
    tokens = sum(t.auditor_tokens for t in transcripts)
    return ModelUsage(output_tokens=tokens, total_tokens=tokens)


def _results(transcripts: Sequence[Transcript]) -> EvalResults:
    """Per score name: how many samples have it and its mean (and standard error from two samples on), rounded
    as the scores are."""
    per_sample = [{n: float(s.as_float()) for n, s in inspect_scores(t, rounded=False).items()} for t in transcripts]
    names = sorted({name for values in per_sample for name in values})
    scores = []
    for name in names:
        values = [v[name] for v in per_sample if name in v]
        digits = REWARD_DIGITS if name.endswith("reward") else METRIC_DIGITS
        mean = sum(values) / len(values)
        metrics = {"mean": EvalMetric(name="mean", value=round(mean, digits))}
        if len(values) > 1:
            variance = sum((x - mean) ** 2 for x in values) / (len(values) - 1)
            metrics["stderr"] = EvalMetric(name="stderr", value=round(math.sqrt(variance / len(values)), digits))
        scores.append(
            EvalScore(
                name=name,
                scorer=name,
                scored_samples=len(values),
                unscored_samples=len(transcripts) - len(values),
                metrics=metrics,
            )
        )
    completed = sum(t.status != "error" for t in transcripts)
    return EvalResults(total_samples=len(transcripts), completed_samples=completed, scores=scores)


def model_roles(transcripts: Sequence[Transcript]) -> dict[str, ModelConfig | list[ModelConfig]]:
    """The auditor and target models of the run, as Inspect's `--model-role` records them (a list where several)."""
    roles: dict[str, ModelConfig | list[ModelConfig]] = {}
    for role, models in (
        ("auditor", sorted({t.auditor_model for t in transcripts})),
        ("target", sorted({t.target_model for t in transcripts})),
    ):
        configs = [ModelConfig(model=m, config=GenerateConfig()) for m in models]
        roles[role] = configs[0] if len(configs) == 1 else configs
    return roles


def _models(transcripts: Sequence[Transcript]) -> str:
    models = sorted({t.auditor_model for t in transcripts})
    return models[0] if len(models) == 1 else "mixed"


def _first(transcripts: Sequence[Transcript]) -> Transcript:
    """The run's first audit: appending audits or scoring a copy leaves it unchanged, so it names the run."""
    return min(transcripts, key=lambda t: (_utc(t.created), t.id))


def run_key(transcripts: Sequence[Transcript]) -> str:
    """A stable id for the run these transcripts belong to (file name, eval and run ids)."""
    return hashlib.sha256(_first(transcripts).id.encode("utf-8")).hexdigest()[:16]


def log_file_name(transcripts: Sequence[Transcript]) -> str:
    """The run's log file name in Inspect's `<time>_<task>_<id>.eval` form, the same on every export.

    A fixed name per run means a re-export (or `audit` then `export`) replaces the log instead of adding
    a second one that `inspect view` would list as another run.
    """
    started = _utc(_first(transcripts).created)
    task = task_name(transcripts).replace("/", "-")
    return f"{started:%Y-%m-%dT%H-%M-%S}+00-00_{task}_{run_key(transcripts)}{LOG_SUFFIXES[0]}"


def log_path(transcripts: Sequence[Transcript], path: Path) -> Path:
    """Where the log goes: `path` itself when it ends in .eval or .json, else the run's log inside directory `path`.

    Any other suffix is refused, because writing there would create a directory named like a file.
    """
    path = Path(path)
    if path.is_dir():
        return path / log_file_name(transcripts)
    if path.suffix in LOG_SUFFIXES:
        return path
    if path.exists() or path.suffix:
        allowed = " or ".join(LOG_SUFFIXES)
        raise ValueError(f"{path}: an Inspect log must be a file ending in {allowed}, or a directory to write it in")
    return path / log_file_name(transcripts)


def export_inspect_log(transcripts: Sequence[Transcript], path: Path, *, completed_at: datetime | None = None) -> Path:
    """Write an Inspect log (`.eval` or `.json` by suffix; a directory gets the run's `.eval` file).

    `completed_at` is when the run finished (default: when its last audit started). The file appears
    atomically (written beside it, then renamed), so a re-export replaces it in one step. Returns its path.
    """
    if not transcripts:
        raise ValueError(f"export_inspect_log: no transcripts to write to {path}")
    path = log_path(transcripts, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    started = _utc(_first(transcripts).created)
    finished = _utc(completed_at) if completed_at is not None else max(_utc(t.created) for t in transcripts)
    key = run_key(transcripts)
    samples = samples_of(transcripts)
    metadata: dict[str, Any] = {
        "target_models": sorted({t.target_model for t in transcripts}),
        "auditor_models": sorted({t.auditor_model for t in transcripts}),
        "behaviors": sorted({t.behavior_id or "benign" for t in transcripts}),
    }
    usage: dict[str, ModelUsage] = {
        model: _auditor_usage([t for t in transcripts if t.auditor_model == model])
        for model in sorted({t.auditor_model for t in transcripts})
    }
    log = EvalLog(
        status="success",
        eval=EvalSpec(
            eval_id=key,
            run_id=key,
            task_id=key,
            created=started.isoformat(),
            task=task_name(transcripts),
            task_registry_name=task_name(transcripts),
            dataset=EvalDataset(
                name="auditrl", samples=len({s.id for s in samples}), sample_ids=sorted({str(s.id) for s in samples})
            ),
            model=_models(transcripts),
            model_roles=model_roles(transcripts),
            config=EvalConfig(epochs=max(s.epoch for s in samples)),
            metadata=metadata,
        ),
        results=_results(transcripts),
        stats=EvalStats(
            started_at=started.isoformat(),
            completed_at=max(started, finished).isoformat(),
            model_usage=usage,
            role_usage={"auditor": _auditor_usage(transcripts)},
        ),
        samples=samples,
    )
    tmp = path.with_name(f".{path.name}.tmp")
    write_eval_log(log, tmp, format="eval" if path.suffix == ".eval" else "json")
    os.replace(tmp, path)
    return path
