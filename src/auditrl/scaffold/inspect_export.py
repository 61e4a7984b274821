"""Export transcripts as an Inspect eval log, so `inspect view` can browse audits.

One sample per transcript: the input is the seed's instructions, the messages are the auditor's own
conversation (its tool calls and the results the engine returned), the output is the final report,
and the numeric leaves of `transcript.scores` (nested judge verdicts included, as dotted names such as
`binary.reward`) become Inspect scores, summarised per name in the log's results. The target tree,
which Inspect has no notion of, goes into the sample's store (every node) and metadata (each branch,
root to leaf, for reading in the viewer), next to the behavior, the report and the hidden system
prompt. A run has one log with a fixed name, so exporting it again replaces the log rather than
adding a duplicate that `inspect view` would list as a second run.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
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
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    ModelOutput,
    ModelUsage,
)
from inspect_ai.scorer import Score
from inspect_ai.tool import ToolCall, ToolCallError

from auditrl.scaffold.transcript import AuditorMessage, Transcript

TASK_NAME = "auditrl_audit"
LOG_SUFFIXES = (".eval", ".json")


def _auditor_chat(messages: Sequence[AuditorMessage]) -> list[ChatMessage]:
    """The auditor's conversation as Inspect chat messages, tool results linked to their calls."""
    functions: dict[str, str] = {}
    chat: list[ChatMessage] = []
    for m in messages:
        if m.role == "system":
            chat.append(ChatMessageSystem(content=m.content))
        elif m.role == "user":
            chat.append(ChatMessageUser(content=m.content))
        elif m.role == "assistant":
            calls = [
                ToolCall(id=c.id, function=c.function, arguments=c.arguments, parse_error=c.parse_error)
                for c in m.tool_calls
            ]
            functions.update({c.id: c.function for c in m.tool_calls})
            chat.append(ChatMessageAssistant(content=m.content, tool_calls=calls or None))
        else:
            chat.append(
                ChatMessageTool(
                    content=m.content,
                    tool_call_id=m.tool_call_id,
                    function=functions.get(m.tool_call_id or ""),
                    error=ToolCallError("parsing", m.error) if m.error else None,
                )
            )
    return chat


def _sample(transcript: Transcript, epoch: int) -> EvalSample:
    """One Inspect sample for one audit; everything Inspect has no field for goes to metadata and store."""
    report = transcript.report
    branches = [
        {
            "leaf": leaf,
            "messages": [m.model_dump(exclude_defaults=True) for m in transcript.branch(leaf)],
        }
        for leaf in transcript.leaves()
    ]
    output_text = report.model_dump_json(indent=2) if report is not None else (transcript.error or "")
    return EvalSample(
        id=transcript.id,
        epoch=epoch,
        input=transcript.seed_instructions,
        target=transcript.behavior_id or "benign",
        messages=_auditor_chat(transcript.auditor_messages),
        output=ModelOutput.from_content(model=transcript.auditor_model, content=output_text),
        scores={name: Score(value=value) for name, value in score_values(transcript.scores).items()} or None,
        metadata={
            "behavior_id": transcript.behavior_id,
            "benign": transcript.benign,
            "seed_id": transcript.seed_id,
            "auditor_model": transcript.auditor_model,
            "target_model": transcript.target_model,
            "target_family": transcript.target_family,
            "status": transcript.status,
            "error": transcript.error,
            "turns_used": transcript.turns_used,
            "auditor_tokens": transcript.auditor_tokens,
            "report": report.model_dump(mode="json") if report is not None else None,
            "unverified_quotes": report.unverified_quotes if report is not None else 0,
            "target_system_prompt": transcript.target_system_prompt,
            "target_tools": [t.model_dump(mode="json") for t in transcript.target_tools],
            "target_prefill": transcript.metadata.get("target_prefill"),
            "prefill_modes": dict(Counter(m.prefill_mode for m in transcript.target_messages if m.prefill_mode)),
            "target_branches": branches,
        },
        store={
            "target_messages": [m.model_dump(mode="json") for m in transcript.target_messages],
            "head": transcript.head,
            "scores": transcript.scores,
        },
        started_at=_utc(transcript.created).isoformat(),
        model_usage={transcript.auditor_model: _auditor_usage([transcript])},
        error=EvalError(message=transcript.error or "audit failed", traceback="", traceback_ansi="")
        if transcript.status == "error"
        else None,
    )


def score_values(scores: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The numeric leaves of (nested) score dicts by dotted name, e.g. {"binary": {"reward": 1.0}} -> "binary.reward".

    Judges and reward designs store nested verdicts, so only leaves can become Inspect scores; booleans,
    strings, lists, None (an abstention) and NaN are left to the sample's store, where nothing is lost.
    """
    out: dict[str, float] = {}
    for key, value in scores.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(score_values(value, f"{name}."))
        elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            out[name] = float(value)
    return out


def _utc(moment: datetime) -> datetime:
    """`moment` in UTC; a naive time (from hand-written JSONL) is taken to be UTC already."""
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def _auditor_usage(transcripts: Sequence[Transcript]) -> ModelUsage:
    """Auditor output tokens, the one usage figure a transcript records."""
    tokens = sum(t.auditor_tokens for t in transcripts)
    return ModelUsage(output_tokens=tokens, total_tokens=tokens)


def _results(transcripts: Sequence[Transcript]) -> EvalResults:
    """Per score name: how many samples have it and its mean (and standard error from two samples on)."""
    per_sample = [score_values(t.scores) for t in transcripts]
    names = sorted({name for values in per_sample for name in values})
    scores = []
    for name in names:
        values = [v[name] for v in per_sample if name in v]
        mean = sum(values) / len(values)
        metrics = {"mean": EvalMetric(name="mean", value=mean)}
        if len(values) > 1:
            variance = sum((x - mean) ** 2 for x in values) / (len(values) - 1)
            metrics["stderr"] = EvalMetric(name="stderr", value=math.sqrt(variance / len(values)))
        scores.append(
            EvalScore(
                name=name,
                scorer=name.split(".", 1)[0],
                scored_samples=len(values),
                unscored_samples=len(transcripts) - len(values),
                metrics=metrics,
            )
        )
    completed = sum(t.status != "error" for t in transcripts)
    return EvalResults(total_samples=len(transcripts), completed_samples=completed, scores=scores)


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
    return f"{started:%Y-%m-%dT%H-%M-%S}+00-00_{TASK_NAME.replace('_', '-')}_{run_key(transcripts)}{LOG_SUFFIXES[0]}"


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


def export_inspect_log(
    transcripts: Sequence[Transcript], path: Path, *, completed_at: datetime | None = None
) -> Path:
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
    epochs: dict[str, int] = {}
    samples = []
    for t in transcripts:
        epochs[t.id] = epochs.get(t.id, 0) + 1
        samples.append(_sample(t, epochs[t.id]))
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
            task=TASK_NAME,
            dataset=EvalDataset(name="auditrl", samples=len(samples), sample_ids=[s.id for s in samples]),
            model=_models(transcripts),
            config=EvalConfig(),
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
