"""Reading Inspect `.eval` logs back as transcripts: auditrl's own logs and Petri 3's.

A sample that carries a transcript under `TRANSCRIPT_KEY` (an `auditrl export`, an
`auditrl audit` log, a run of the `auditrl/audit` task) is read back exactly as written. A sample of
Petri 3's `inspect_petri/audit` task is mapped by `petri3_import`. Any other sample is refused with an
error that names the file and the sample, since guessing at a log's meaning would make up an audit.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from inspect_ai.log import EvalLog, EvalSample, read_eval_log
from pydantic import ValidationError

from auditrl.scaffold.petri3_import import is_petri3, petri3_transcript
from auditrl.scaffold.transcript import Transcript

TRANSCRIPT_KEY = "auditrl_transcript"
"""Where an auditrl transcript travels in an Inspect sample's store (auditrl.evaluate.inspect_export writes it)."""

EVAL_SUFFIX = ".eval"


class LogReadError(ValueError):
    """An Inspect log that cannot be read as audit transcripts; the message names the file and sample."""


def _where(path: Path, sample: EvalSample) -> str:
    return f"{path}: sample {sample.id!r} (epoch {sample.epoch})"


def sample_transcript(path: Path, log: EvalLog, sample: EvalSample) -> Transcript:
    """One sample as a transcript: the one stored in it, else Petri 3's audit mapped onto it."""
    stored = (sample.store or {}).get(TRANSCRIPT_KEY)
    if stored is not None:
        try:
            return Transcript.model_validate(stored)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(transcript)"
            raise LogReadError(
                f"{_where(path, sample)}: the stored transcript is invalid at {where}: {first['msg']}"
            ) from None
    if is_petri3(sample):
        return petri3_transcript(log, sample, source=path.name)
    raise LogReadError(
        f"{_where(path, sample)}: neither an auditrl transcript (store key {TRANSCRIPT_KEY!r}) nor a Petri 3 audit "
        "(its 'target' and 'auditor' timelines)"
    )


def iter_eval_transcripts(path: Path) -> Iterator[Transcript]:
    """The transcripts of an Inspect `.eval` log, one per sample (and epoch), in the log's order."""
    path = Path(path)
    try:
        log = read_eval_log(str(path), resolve_attachments=True)
    except Exception as exc:  # inspect-ai raises many types for unreadable files; all mean the same here
        raise LogReadError(f"{path}: not a readable Inspect log: {type(exc).__name__}: {exc}") from exc
    for sample in log.samples or []:
        yield sample_transcript(path, log, sample)
