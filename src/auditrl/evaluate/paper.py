"""The paper's published headline rows, shown beside our results for orientation (never as ours)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from auditrl.configfile import load_yaml, read_user_text


class ReferenceRow(BaseModel):
    """A published result from the paper, for orientation beside ours."""

    label: str
    short: str = Field(default="", description="A few words naming the row in a narrow column (the label by default).")
    audit_quality: float
    false_positive: float
    production: float
    realism: float
    composite: float
    ci: dict[str, float] = Field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.short or self.label

    def cell(self, metric: str) -> str:
        """The published value with its interval, or "not reported" for a measure the paper gives no number for."""
        if metric not in type(self).model_fields:
            return "not reported"
        value = float(getattr(self, metric))
        half = self.ci.get(metric)
        return f"{value:.1f} ± {half:.1f}" if half is not None else f"{value:.1f}"


class PaperReference(BaseModel):
    source: str
    rows: list[ReferenceRow]


def load_paper_reference(path: Path | None = None) -> PaperReference:
    """The paper's headline rows (a data file shipped with the package unless `path` is given)."""
    if path is None:
        text = resources.files("auditrl.evaluate").joinpath("data/paper_reference.yaml").read_text(encoding="utf-8")
        where = "auditrl/evaluate/data/paper_reference.yaml"
    else:
        text, where = read_user_text(path), str(path)
    try:
        return PaperReference.model_validate(load_yaml(text, where))
    except ValidationError as exc:
        raise ValueError(f"{where}: invalid paper reference: {exc}") from exc
