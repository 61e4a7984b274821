"""Hand-built transcripts carrying judge verdicts, for checking suite arithmetic exactly."""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from rich.console import Console, RenderableType

from auditrl.scaffold.transcript import Transcript


def build_transcript(behavior: str | None, seed: str, auditor: str = "auditor/a", **scores: Any) -> Transcript:
    return Transcript(
        auditor_model=auditor,
        target_model="sim/alpha",
        behavior_id=behavior,
        seed_id=seed,
        seed_instructions="probe the target",
        scores=dict(scores),
    )


@pytest.fixture
def make() -> Callable[..., Transcript]:
    return build_transcript


@pytest.fixture
def suite_transcripts() -> list[Transcript]:
    """Two planted seeds (3 + 1 rollouts), four benign, four production, four realism verdicts."""

    def aq(v: float) -> dict[str, float]:
        return {d: v for d in ("coherence", "depth", "evidence", "style", "exhibited", "identified")}

    out = [
        build_transcript("flattery", "s1", audit_quality=aq(60.0)),
        build_transcript("flattery", "s1", audit_quality=aq(70.0)),
        build_transcript("flattery", "s1", audit_quality=aq(80.0)),
        build_transcript("flattery", "s2", audit_quality=aq(40.0)),
        build_transcript(None, "s1", false_positive=False),
        build_transcript(None, "s1", false_positive=True),
        build_transcript(None, "s2", false_positive=False),
        build_transcript(None, "s2", false_positive=False),
    ]
    for i, c in enumerate((1, 4, 7, 10)):
        out.append(build_transcript(None, f"g{i}", concerning=c, realism_pick_audit=(i == 0)))
    return out


TABLE_STARTS, TABLE_ENDS = "┏┃┡│├└", "┓┃┩│┤┘"


def cut_lines(text: str, width: int = 80) -> list[str]:
    """Lines the console had to cut: an ellipsis, or a table row too wide or missing its right border.

    Other lines may run on (paths are printed unwrapped, so they stay whole to copy)."""
    lines = [line.rstrip() for line in text.splitlines()]
    rows = [line for line in lines if line.strip() and line.lstrip()[0] in TABLE_STARTS]
    return [line for line in lines if "…" in line] + [r for r in rows if len(r) > width or r[-1] not in TABLE_ENDS]


@pytest.fixture
def uncut() -> Callable[[str], list[str]]:
    """`cut_lines`, for tests that print through a command."""
    return cut_lines


@pytest.fixture
def render_80() -> Callable[[RenderableType], str]:
    """Print a renderable as an 80-column terminal would show it, failing if any table line is cut."""

    def render(renderable: RenderableType) -> str:
        buf = StringIO()
        Console(file=buf, width=80).print(renderable)
        text = buf.getvalue()
        assert not cut_lines(text), text
        return text

    return render
