"""Export transcripts as an Inspect eval log, so `inspect view` can browse audits.

One sample per transcript: the input is the seed's instructions, the messages are the auditor's own
conversation (its tool calls and the results the engine returned), the output is the final report,
and numeric entries of `transcript.scores` become Inspect scores. The target tree, which Inspect has
no notion of, goes into the sample's store (every node) and metadata (each branch, root to leaf, for
reading in the viewer), next to the behavior, the report and the hidden system prompt.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
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
)
from inspect_ai.scorer import Score
from inspect_ai.tool import ToolCall, ToolCallError

from auditrl.scaffold.transcript import AuditorMessage, Transcript

TASK_NAME = "auditrl_audit"


def _auditor_chat(messages: Sequence[AuditorMessage]) -> list[ChatMessage]:
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


def _numeric_scores(transcript: Transcript) -> dict[str, Score]:
    return {
        name: Score(value=value)
        for name, value in transcript.scores.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and value == value
    }


def _sample(transcript: Transcript, epoch: int) -> EvalSample:
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
        scores=_numeric_scores(transcript) or None,
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
            "target_branches": branches,
        },
        store={
            "target_messages": [m.model_dump(mode="json") for m in transcript.target_messages],
            "head": transcript.head,
            "scores": transcript.scores,
        },
        started_at=transcript.created.isoformat(),
        error=None,
    )


def _results(transcripts: Sequence[Transcript]) -> EvalResults:
    names = sorted({name for t in transcripts for name in _numeric_scores(t)})
    scores = []
    for name in names:
        values = [float(s.value) for t in transcripts if (s := _numeric_scores(t).get(name)) is not None]
        mean = sum(values) / len(values)
        scores.append(
            EvalScore(
                name=name,
                scorer=name,
                scored_samples=len(values),
                unscored_samples=len(transcripts) - len(values),
                metrics={"mean": EvalMetric(name="mean", value=mean)},
            )
        )
    return EvalResults(total_samples=len(transcripts), completed_samples=len(transcripts), scores=scores)


def _models(transcripts: Sequence[Transcript]) -> str:
    models = sorted({t.auditor_model for t in transcripts})
    return models[0] if len(models) == 1 else "mixed"


def export_inspect_log(transcripts: Sequence[Transcript], path: Path) -> Path:
    """Write an Inspect log (`.eval` or `.json` by suffix; a folder gets a new `.eval` file in it).

    The file appears atomically (written beside it, then renamed). Returns the file's path.
    """
    if not transcripts:
        raise ValueError(f"export_inspect_log: no transcripts to write to {path}")
    now = datetime.now(timezone.utc)
    path = Path(path)
    if path.suffix not in (".eval", ".json"):
        path = path / f"{now:%Y-%m-%dT%H-%M-%S}+00-00_{TASK_NAME.replace('_', '-')}_{transcripts[0].id}.eval"
    path.parent.mkdir(parents=True, exist_ok=True)
    started = min(t.created for t in transcripts)
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
    log = EvalLog(
        status="success",
        eval=EvalSpec(
            created=now.isoformat(),
            task=TASK_NAME,
            dataset=EvalDataset(name="auditrl", samples=len(samples), sample_ids=[s.id for s in samples]),
            model=_models(transcripts),
            config=EvalConfig(),
            metadata=metadata,
        ),
        results=_results(transcripts),
        stats=EvalStats(started_at=started.isoformat(), completed_at=now.isoformat()),
        samples=samples,
    )
    tmp = path.with_name(f".{path.name}.tmp")
    write_eval_log(log, tmp, format="eval" if path.suffix == ".eval" else "json")
    os.replace(tmp, path)
    return path
