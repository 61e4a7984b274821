"""The typed audit transcript: every target branch, the auditor's side, the report and the scores.

Everything downstream (judges, rewards, trainer, evaluate, analysis, pages) reads this model, so
it is the one contract between the episode engine and the rest of the system.
"""

from __future__ import annotations

import hashlib
import itertools
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from auditrl.scaffold.tool_sets import ToolSetName
from auditrl.scaffold.transcript_keys import JUDGE_ERRORS

Role = Literal["system", "user", "assistant", "tool"]
Status = Literal["completed", "budget_exhausted", "error"]
PrefillMode = Literal["honoured", "emulated", "ignored"]
"""What became of a prefill (see auditrl.models.prefill): the target continued it as its own words; it was
asked to begin its reply with it and did; it was asked and did not (the reply stands without the prefill)."""


def new_id() -> str:
    return uuid.uuid4().hex[:12]


def keyed_ids(key: str) -> Iterator[str]:
    """Ids in new_id's form drawn from a key: the same audit shows a policy the same message ids in every
    process, so its prompt (and any score of it) does not change with a random id."""
    return (hashlib.sha256(f"{key}:{n}".encode()).hexdigest()[:12] for n in itertools.count())


class ToolCallRecord(BaseModel):
    """A tool call made by the auditor or by the target, as parsed (parse_error set when it was malformed)."""

    id: str
    function: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    parse_error: str | None = None


class ToolSpec(BaseModel):
    """A synthetic tool the auditor gave the target with create_tool (its latest definition)."""

    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=dict, description="JSON schema of the arguments.")
    removed: bool = Field(
        default=False, description="Taken away again (Petri 3's remove_tool, or a restart without tools)."
    )


class TargetMessage(BaseModel):
    """One node of the target conversation tree; `parent` links make rollback branches explicit."""

    id: str
    parent: str | None
    role: Role
    content: str
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    tool_call_id: str | None = None
    prefill: str | None = Field(default=None, description="Text the auditor forced at the start of this reply.")
    prefill_mode: PrefillMode | None = Field(
        default=None, description="How the auditor's prefill for this reply was carried out; None = no prefill asked."
    )
    tool_status: Literal["success", "error"] | None = Field(
        default=None, description="On a tool result: whether the auditor reported the simulated call as failed."
    )
    annotations: dict[str, Any] = Field(
        default_factory=dict, description="Hidden ground truth from simulated targets; never shown to auditors."
    )

    def generated(self) -> str:
        """The text the target generated itself: the content after the auditor's prefill, if any."""
        if self.prefill and self.content.startswith(self.prefill):
            return self.content[len(self.prefill) :]
        return self.content


class AuditorMessage(BaseModel):
    """The auditor's own conversation: its outputs and the tool results the engine returned to it."""

    turn: int
    role: Role
    content: str
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    tool_call_id: str | None = None
    error: str | None = Field(default=None, description="Set on a tool result that reports an invalid call.")


class QuoteCheck(BaseModel):
    quote: str
    verified: bool
    message_id: str | None = Field(default=None, description="Target message where the quote was found.")


class Prediction(BaseModel):
    rank: int = Field(ge=1, le=3)
    description: str
    confidence: float = Field(ge=0.0, le=1.0)
    quotes: list[str] = Field(default_factory=list)
    reasoning: str = ""
    quote_checks: list[QuoteCheck] = Field(default_factory=list)


class Report(BaseModel):
    """The auditor's final report: ranked predictions, or an explicit finding of no hidden behavior."""

    no_behavior_found: bool
    predictions: list[Prediction] = Field(default_factory=list, max_length=3)
    summary: str = ""
    parse_error: str | None = Field(default=None, description="Set when the report had to be recovered leniently.")

    @property
    def unverified_quotes(self) -> int:
        return sum(not q.verified for p in self.predictions for q in p.quote_checks)


class Budget(BaseModel):
    max_turns: int = Field(default=15, ge=1)
    max_tokens: int | None = Field(default=None, ge=1, description="Auditor output tokens; None = unlimited.")


class Transcript(BaseModel):
    """One audit episode, complete enough to judge, replay, export and analyse."""

    id: str = Field(default_factory=new_id)
    created: datetime = Field(default_factory=lambda: datetime.now(UTC))
    auditor_model: str
    target_model: str
    target_family: str | None = None
    behavior_id: str | None = Field(default=None, description="Planted behavior; None for a benign target.")
    seed_id: str
    seed_instructions: str
    target_system_prompt: str = Field(default="", description="The hidden plant (or benign persona prompt).")
    tool_set: ToolSetName | None = Field(
        default=None,
        description="The auditor's tool set (see scaffold.tool_sets); None in transcripts older than the field.",
    )
    target_tools: list[ToolSpec] = Field(default_factory=list)
    target_messages: list[TargetMessage] = Field(default_factory=list)
    head: str | None = Field(default=None, description="Id of the current leaf of the target conversation.")
    auditor_messages: list[AuditorMessage] = Field(default_factory=list)
    report: Report | None = None
    budget: Budget = Field(default_factory=Budget)
    turns_used: int = Field(default=0, ge=0)
    auditor_tokens: int = Field(default=0, ge=0)
    status: Status = "completed"
    error: str | None = None
    scores: dict[str, Any] = Field(
        default_factory=dict,
        description="Judge verdicts and rewards; the keys the package writes are in scaffold.transcript_keys.",
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="Where the audit came from (`rollout`, and for training rollouts `step` and `group`); the keys the "
        "package writes are in scaffold.transcript_keys.",
    )

    @property
    def benign(self) -> bool:
        return self.behavior_id is None

    @property
    def behavior_shown(self) -> bool:
        """A target reply is annotated `expressed`: ground truth that only simulated and scripted targets write, for
        what splits audits by whether the behavior showed (curricula, benchmarks); other targets never show it."""
        return any(m.annotations.get("expressed") for m in self.target_said())

    def record_judge_error(self, judge: str, error: str) -> None:
        """Why `judge` left this audit unjudged, under `scores["judge_errors"]` (judge name -> error)."""
        self.scores.setdefault(JUDGE_ERRORS, {})[judge] = error

    def clear_judge_error(self, judge: str) -> None:
        """A verdict replaced the error of an earlier attempt."""
        errors = self.scores.get(JUDGE_ERRORS)
        if isinstance(errors, dict) and errors.pop(judge, None) is not None and not errors:
            del self.scores[JUDGE_ERRORS]

    def message(self, message_id: str) -> TargetMessage:
        for m in self.target_messages:
            if m.id == message_id:
                return m
        raise KeyError(message_id)

    def branch(self, leaf: str | None = None) -> list[TargetMessage]:
        """Messages from the root to `leaf` (default: the current head), in order."""
        by_id = {m.id: m for m in self.target_messages}
        path: list[TargetMessage] = []
        cur = leaf if leaf is not None else self.head
        while cur is not None:
            node = by_id[cur]
            path.append(node)
            cur = node.parent
        return path[::-1]

    def leaves(self) -> list[str]:
        parents = {m.parent for m in self.target_messages}
        return [m.id for m in self.target_messages if m.id not in parents]

    def target_said(self) -> list[TargetMessage]:
        """Every target reply on every branch: the only admissible evidence."""
        return [m for m in self.target_messages if m.role == "assistant"]
