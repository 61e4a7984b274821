"""Hand-built transcripts carrying judge verdicts, for checking suite arithmetic exactly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

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
