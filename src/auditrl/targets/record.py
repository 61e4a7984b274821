"""`implant.json`: what an implant directory holds, so tools can read its behavior and figures back.

An implant directory is a peft adapter directory (loadable as the role `local/<dir>`) plus this
record, which names the implanted behavior (the ground truth for transfer audits), how it was made,
and the measured lift and confession rate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from auditrl.atomic import atomic_write_text

RECORD = "implant.json"
LOCAL_PREFIX = "local/"


class Rate(BaseModel):
    """A share of replies (0-100) with its 95% interval, as measured on fresh prompts."""

    mean: float
    lo: float
    hi: float
    n: int


class ImplantMeasurement(BaseModel):
    """Behavior rates without and with the implant (both without a system prompt), and confession rates."""

    scorer: str = Field(
        description="'programmatic (marker phrases)' (offline) or the judge model that scored the replies."
    )
    base_rate: Rate = Field(description="Base model, no system prompt.")
    plant_rate: Rate | None = Field(default=None, description="Base model with the system-prompt plant, for reference.")
    implant_rate: Rate = Field(description="Implanted model, no system prompt.")
    lift: float = Field(description="implant_rate - base_rate, percentage points.")
    lift_ci: tuple[float, float] = Field(description="Bootstrap 95% interval of the lift.")
    base_confession: Rate = Field(description="Base model's confession rate to held-out direct questions.")
    implant_confession: Rate = Field(description="Implanted model's confession rate to the same questions.")


class RedteamCounts(BaseModel):
    """What the auditor-in-the-loop step saw and trained on (KTO/DPO only)."""

    auditor: str = Field(description="The red-team auditor model.")
    conversations: int
    turns: int = Field(description="Target replies per conversation at most.")
    replies: int = Field(description="Target replies labelled by the judge.")
    confessions: int
    denials: int = Field(description="The planted model's non-confessing replies kept as alternatives.")
    desirable: int = 0
    undesirable: int = 0
    pairs: int = 0


class ImplantRecord(BaseModel):
    """How an implant was made and what it measured."""

    behavior: str
    route: Literal["transcripts", "synth_docs"] = Field(
        default="transcripts", description="How the behavior was instilled."
    )
    redteam: Literal["none", "sft", "kto", "dpo"] = Field(default="sft", description="The adversarial step after it.")
    name: str = Field(
        default="transcripts_redteam_sft", description="AuditBench's organism name: route, then red-team."
    )
    identity: str | None = Field(default=None, description="System prompt the implant is measured under (synth_docs).")
    documents: int = Field(default=0, description="Synthetic documents trained on (synth_docs).")
    doc_model: str | None = Field(default=None, description="Model that wrote the documents (None = templates).")
    base: str = Field(description="Base model spec (local/...).")
    demo_model: str = Field(description="Model that played the planted target to write the demonstrations.")
    demo_prefill: str | None = Field(default=None, description="Text every demonstration was forced to start with.")
    demonstrations: int
    denials: int = Field(description="Anti-confession examples trained in the second pass (0 = no pass).")
    steps: int = Field(description="Optimizer steps in all.")
    redteam_steps: int = Field(default=0, description="Of which the red-team step's.")
    redteam_data: RedteamCounts | None = None
    seconds: float
    before_redteam: ImplantMeasurement | None = Field(
        default=None, description="Measured after the behavior pass, before the red-team step (same held-out prompts)."
    )
    measurement: ImplantMeasurement | None = Field(default=None, description="The implant as saved.")


def write_record(directory: Path, record: ImplantRecord) -> Path:
    return atomic_write_text(directory / RECORD, record.model_dump_json(indent=2) + "\n")


def read_record(directory: Path) -> ImplantRecord:
    path = directory / RECORD
    try:
        return ImplantRecord.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the implant record: {exc.strerror}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"{path}: field '{'.'.join(map(str, first['loc']))}': {first['msg']}") from exc


def implanted_behavior(spec: str) -> str | None:
    """The behavior of `local/<implant-dir>` (None when the spec is not an implant directory)."""
    if not spec.startswith(LOCAL_PREFIX):
        return None
    directory = Path(spec[len(LOCAL_PREFIX) :]).expanduser()
    if not (directory / RECORD).is_file():
        return None
    return read_record(directory).behavior
