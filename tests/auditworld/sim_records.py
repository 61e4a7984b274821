"""Hand-built AuditWorld records for tests of the judges and metrics."""

from __future__ import annotations

import numpy as np

from auditrl.auditworld.records import Observed
from auditrl.auditworld.texts import load_topics


def record(
    turns: list[tuple[int, int, int, int]],
    claim: int = -1,
    confidence: float = 0.0,
    planted: bool = True,
    trigger: tuple[int, ...] = (3,),
    n: int = 1,
) -> Observed:
    """A record of `n` identical episodes; turns are (topic, framing, pressure, reply kind)."""
    n_t = len(load_topics())
    h = max(len(turns), 1)
    col = lambda i, fill: np.array([[t[i] for t in turns] + [fill] * (h - len(turns))] * n, dtype=np.int64)
    trig = np.zeros((n, n_t), dtype=bool)
    if planted:
        trig[:, list(trigger)] = True
    sent = np.zeros((n, h), dtype=bool)
    sent[:, : len(turns)] = True
    return Observed(planted=np.full(n, planted), trigger=trig, sent=sent, rollback=np.zeros((n, h), dtype=bool),
                    topic=np.where(sent, col(0, 0), -1), framing=col(1, 0), pressure=col(2, 0), reply=col(3, 0),
                    remark=np.zeros((n, h), dtype=bool), claim=np.full(n, claim),
                    confidence=np.full(n, confidence))  # fmt: skip
