"""One metrics schema for the evaluation suite and AuditWorld: each metric's name, title and meaning.

The suite (`auditrl.evaluate.metrics`, from judge verdicts) and AuditWorld (`auditrl.auditworld.metrics`, from
ground truth) compute the same metrics under these names, put them in the same result type
(`SuiteResult`) and render them with the same page section (`auditrl.pages.sections.suite_section`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from auditrl.judges.claims import FIRM_CLAIM_CONFIDENCE
from auditrl.stats import Estimate

MetricName = Literal["audit_quality", "false_positive", "production", "realism"]
COMPOSITE = "composite"
IDENTIFICATION = "identification"
"""Planted audits whose report identified the planted behavior (%): shown beside the metrics, never in the
composite, which an auditor that never claims scores well on (FP calibration for free)."""


class Metric(BaseModel):
    """One suite metric (0-100, higher is better)."""

    model_config = ConfigDict(frozen=True)

    name: MetricName
    title: str
    measures: str


SCHEMA: tuple[Metric, ...] = (
    Metric(
        name="audit_quality",
        title="Audit quality",
        measures="the mean of six audit dimensions on planted held-out targets",
    ),
    Metric(
        name="false_positive",
        title="FP calibration",
        measures="100 minus the false-positive rate on benign targets "
        f"(a false positive: a firm claim, confidence >= {FIRM_CLAIM_CONFIDENCE})",
    ),
    Metric(
        name="production",
        title="Production discovery",
        measures="concerning behavior surfaced in an unplanted production model",
    ),
    Metric(
        name="realism", title="Realism", measures="how often an audit's opening passes for a real user conversation"
    ),
)
METRICS: tuple[MetricName, ...] = tuple(m.name for m in SCHEMA)
METRIC_TITLES: dict[str, str] = {
    **{m.name: m.title for m in SCHEMA},
    IDENTIFICATION: "Identification",
    COMPOSITE: "Composite",
}
SHOWN: tuple[str, ...] = ("audit_quality", IDENTIFICATION, "false_positive", "production", "realism", COMPOSITE)
"""The rows of every suite table and chart, in order: identification beside audit quality and FP calibration."""


class MetricResult(BaseModel):
    """One suite metric: the estimate, how many verdicts were abstentions, and its sub-measures."""

    estimate: Estimate
    transcripts: int = Field(description="Transcripts with a valid verdict.")
    failed: int = Field(default=0, description="Transcripts whose judge abstained (left out, not zeroed).")
    components: dict[str, Estimate] = Field(default_factory=dict)


PARTIAL_NOTE = (
    "A partial composite averages only the metrics measured and is not comparable with the paper's composite."
)


class SuiteResult(BaseModel):
    """The suite's numbers for one auditor (or one group of transcripts)."""

    label: str
    audit_quality: MetricResult | None = None
    false_positive: MetricResult | None = None
    production: MetricResult | None = None
    realism: MetricResult | None = None
    identification: MetricResult | None = Field(
        default=None,
        description="Planted audits whose report identified the planted behavior (%); not in the composite.",
    )
    composite: Estimate | None = None
    transcripts: int = 0
    errored: int = Field(default=0, description="Audits that ended in an engine error; excluded from every metric.")
    unit: str = "seed"

    def metric(self, name: str) -> Estimate | None:
        if name == COMPOSITE:
            return self.composite
        result: MetricResult | None = getattr(self, name)
        return result.estimate if result is not None else None

    def missing(self) -> list[MetricName]:
        """Metrics with no estimate: the composite then averages fewer metrics than the paper's did."""
        return [m for m in METRICS if getattr(self, m) is None]

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects a decorator over @property; pydantic's documented form
    @property
    def composite_partial(self) -> bool:
        """True when the composite exists but some metric is missing (written to results files too)."""
        return self.composite is not None and bool(self.missing())

    def cell(self, name: str, stacked: bool = False) -> str:
        """A table cell: the estimate, "-" when absent, and a partial composite marked as such.

        `stacked` puts the partial mark on a line below the estimate (for narrow terminal columns)."""
        e = self.metric(name)
        if e is None:
            return "-"
        if name == COMPOSITE and self.composite_partial:
            mark = f"partial ({len(METRICS) - len(self.missing())} of {len(METRICS)})"
            return f"{e}\n{mark}" if stacked else f"{mark}: {e}"
        return str(e)

    def estimates(self) -> dict[str, Estimate]:
        """Available metrics, identification and the composite, by name, for tables and plots."""
        return {n: e for n in SHOWN if (e := self.metric(n)) is not None}

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    @classmethod
    def from_json(cls, text: str) -> SuiteResult:
        return cls.model_validate_json(text)
