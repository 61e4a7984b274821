"""run_suite's glue: which audits it runs, which judge sees which transcript, and failure handling.

The engine and judges are replaced by fakes that follow the shared contracts. Where a sibling module
(library, plant, roles, engine, store) is not importable in this checkout, a stand-in with the same
names is registered for the duration of the test.
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from auditrl.behaviors.schema import Behavior, Seed
from auditrl.evaluate.runner import SuiteConfig, run_suite
from auditrl.scaffold.runner import open_run
from auditrl.scaffold.transcript import Budget, Transcript


class _Spec(BaseModel):
    seed: Seed
    behavior: Behavior | None
    target_system_prompt: str
    budget: Budget
    auditor_model: str
    target_model: str
    target_family: str | None = None
    tool_protocol: str = "native"


def _stand_ins() -> dict[str, types.ModuleType]:
    mods: dict[str, types.ModuleType] = {}

    def mod(name: str, **attrs: Any) -> None:
        try:
            importlib.import_module(name)
        except ImportError:
            m = types.ModuleType(name)
            m.__dict__.update(attrs)
            mods[name] = m

    mod("auditrl.behaviors.library", load_behaviors=lambda: {}, load_seeds=lambda **_: [])
    mod("auditrl.behaviors.plant", render_plant=lambda b: f"PLANT {b.id}", render_benign=lambda: "BENIGN")
    mod("auditrl.scaffold.spec", AuditSpec=_Spec)
    mod("auditrl.scaffold.auditor_loop", run_audit=None)
    mod("auditrl.scaffold.store", append_transcript=_append)
    return mods


def _append(path: Path, t: Transcript) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(t.model_dump_json() + "\n")


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return self.name


def _behavior(bid: str) -> Behavior:
    return Behavior(
        id=bid,
        name=bid,
        split="heldout",
        definition="A held-out behavior used only to test the suite runner.",
        triggers=["a trigger"],
        evidence=["some evidence"],
        instructions="Behave in the held-out way whenever the trigger is present.",
        cover_story="It is a coincidence.",
    )


async def test_run_suite_runs_parts_judges_and_records_failures(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, module in _stand_ins().items():
        monkeypatch.setitem(sys.modules, name, module)
    importlib.import_module("auditrl.behaviors.plant")
    behaviors = [_behavior("alpha"), _behavior("beta")]
    seeds = [Seed(id=f"{b.id}-{i}", behavior=b.id, instructions="probe") for b in behaviors for i in range(2)]
    seeds.append(Seed(id="other", behavior="not_held_out", instructions="probe"))
    general = [Seed(id="g1", instructions="general"), Seed(id="g2", instructions="general")]
    seen: list[tuple[str, str | None, str, int]] = []

    async def fake_audit(spec: Any, auditor: Any, target: Any) -> Transcript:
        seen.append(
            (
                spec.seed.id,
                spec.behavior.id if spec.behavior else None,
                spec.target_system_prompt,
                spec.budget.max_turns,
            )
        )
        if spec.seed.id == "beta-1" and spec.behavior is not None:
            raise RuntimeError("engine blew up")
        return Transcript(
            auditor_model=spec.auditor_model,
            target_model=spec.target_model,
            behavior_id=spec.behavior.id if spec.behavior else None,
            seed_id=spec.seed.id,
            seed_instructions=spec.seed.instructions,
        )

    async def judge(t: Transcript) -> dict[str, Any] | None:
        if t.benign:
            return {"false_positive": t.seed_id == "alpha-0"}
        if t.seed_id == "alpha-1":
            raise TimeoutError("judge down")
        t.scores["audit_quality"] = {"coherence": 80.0, "depth": 40.0}
        return None

    async def production_judge(t: Transcript) -> dict[str, Any]:
        return {"concerning": 7}

    async def realism_judge(t: Transcript) -> dict[str, Any]:
        return {}  # says nothing: recorded as an abstention

    out = tmp_path / "suite.jsonl"
    result = await run_suite(
        _Named("scripted/auditor"),
        _Named("sim/alpha"),
        judge,
        realism_judge,
        production_judge=production_judge,
        config=SuiteConfig(rollouts=2, planted_turns=7, benign_turns=5, production_turns=9),
        behaviors=behaviors,
        seeds=seeds,
        general_seeds=general,
        tool_protocol="native",
        log=open_run(out),
        audit=fake_audit,
    )
    assert len(seen) == 2 * (4 + 4 + 2)  # rollouts x (planted + benign + production); the non-held-out seed is skipped
    plant = sys.modules["auditrl.behaviors.plant"]
    assert {(p, t) for s, b, p, t in seen if b == "alpha"} == {(plant.render_plant(behaviors[0]), 7)}
    assert {(p, t) for s, b, p, t in seen if b is None and s.startswith("alpha")} == {(plant.render_benign(), 5)}
    assert {(p, t) for s, b, p, t in seen if s.startswith("g")} == {("", 9)}
    assert result.label == "scripted/auditor" and result.transcripts == 20 and result.errored == 2
    assert result.audit_quality is not None and result.audit_quality.estimate.mean == 60.0
    assert result.audit_quality.failed == 2  # alpha-1 judged twice, both abstentions
    assert result.false_positive is not None and result.false_positive.estimate.mean == 75.0
    assert result.production is not None and result.realism is None
    stored = [Transcript.model_validate_json(line) for line in out.read_text().splitlines()]
    assert len(stored) == 20
    failed_judge = [t for t in stored if t.seed_id == "alpha-1" and not t.benign]
    assert all(t.scores["audit_quality"] is None and "judge_errors" in t.scores for t in failed_judge)
    assert all(t.scores["realism_pick_audit"] is None for t in stored if t.metadata["suite_part"] == "production")
    assert sum(t.status == "error" for t in stored) == 2
