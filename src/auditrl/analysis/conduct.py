"""The parts of a stored transcript that strategy summaries and groups read, decoded without the rest.

A transcript line is mostly target replies, seeds and prompts that a strategy summary never reads;
building the whole `Transcript` for each of tens of thousands of lines costs more than everything the
`strategies` command does with them. `ConductView` names only the fields `strategy_features` and
`group_of` read, with the same names and types, and msgspec decodes a line into it while skipping
everything else (still checking that the whole line is JSON). Where the view refuses a line, the whole
model reads it instead: it either accepts it (its lax mode takes some values the view's types do not)
or names the file, the line and the field, exactly as every other reader of transcripts does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import msgspec

from auditrl.reading import FileReadError
from auditrl.scaffold.store import READERS, iter_transcripts, transcript_lines, transcript_of_line
from auditrl.scaffold.transcript import Role, Status, Transcript, new_id


class CallView(msgspec.Struct, gc=False):
    """A tool call's name, arguments and parse error (`ToolCallRecord`)."""

    function: str
    arguments: dict[str, Any] = {}
    parse_error: str | None = None


class AuditorView(msgspec.Struct, gc=False):
    """One message of the auditor's side (`AuditorMessage`)."""

    role: Role
    tool_calls: list[CallView] = []
    error: str | None = None


class TargetView(msgspec.Struct, gc=False):
    """One node of the target tree (`TargetMessage`): its links, role, text and prefill."""

    id: str
    parent: str | None
    role: Role
    content: str
    prefill: str | None = None


class QuoteCheckView(msgspec.Struct, gc=False):
    verified: bool
    message_id: str | None = None


class PredictionView(msgspec.Struct, gc=False):
    confidence: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
    quotes: list[str] = []
    quote_checks: list[QuoteCheckView] = []


class ReportView(msgspec.Struct, gc=False):
    no_behavior_found: bool
    predictions: Annotated[list[PredictionView], msgspec.Meta(max_length=3)] = []
    parse_error: str | None = None


class BudgetView(msgspec.Struct, gc=False):
    max_turns: Annotated[int, msgspec.Meta(ge=1)] = 15


class ConductView(msgspec.Struct, gc=False):
    """What the auditor did and how the audit ended, with the fields that group audits (a `Transcript`'s subset)."""

    auditor_model: str
    target_model: str
    seed_id: str
    seed_instructions: str
    id: str = msgspec.field(default_factory=new_id)
    target_family: str | None = None
    behavior_id: str | None = None
    target_messages: list[TargetView] = []
    auditor_messages: list[AuditorView] = []
    report: ReportView | None = None
    budget: BudgetView = msgspec.field(default_factory=BudgetView)
    turns_used: Annotated[int, msgspec.Meta(ge=0)] = 0
    status: Status = "completed"
    metadata: dict[str, Any] = {}

    @property
    def benign(self) -> bool:
        return self.behavior_id is None


Conduct = ConductView | Transcript
"""Anything a strategy summary can be read from: the view, or a whole transcript."""

_DECODER = msgspec.json.Decoder(ConductView)


def _warn(note: str) -> None:
    import warnings

    warnings.warn(note, stacklevel=3)


def iter_conduct(
    path: Path, on_skip: Callable[[str], None] = _warn
) -> Iterator[tuple[Conduct, Callable[[], Transcript]]]:
    """Each transcript of one file as a `Conduct`, with a call that gives the whole transcript when it is wanted.

    JSONL files are read through the view; other kinds (an Inspect `.eval` log) through their own reader. An
    incomplete final line is skipped and noted, as `read_file` does.
    """
    path = Path(path)
    reader = READERS.get(path.suffix, iter_transcripts)
    if reader is not iter_transcripts:
        for t in reader(path, on_skip):
            yield t, lambda t=t: t  # type: ignore[misc]
        return
    for number, line, last in transcript_lines(path):
        try:
            view: Conduct = _DECODER.decode(line)
        except msgspec.MsgspecError:
            whole = transcript_of_line(path, number, line, last, on_skip)
            if whole is None:
                return
            view = whole
        yield view, _whole(path, number, line, last)


def _whole(path: Path, number: int, line: bytes, last: bool) -> Callable[[], Transcript]:
    def read() -> Transcript:
        t = transcript_of_line(path, number, line, last)
        if t is None:  # the view read this line, so it is whole JSON and never a torn tail
            raise FileReadError(f"{path}: line {number} is not a transcript")
        return t

    return read
