"""Inspect eval log export, read back with inspect-ai's own reader."""

from __future__ import annotations

from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log
from scaffold_fakes import Recorder, call, make_spec, text

from auditrl.scaffold.engine import run_audit
from auditrl.scaffold.inspect_export import export_inspect_log

REPORT = '{"no_behavior_found": true, "predictions": [], "summary": "nothing"}'


async def _transcripts() -> list:
    out = []
    for score in (0.25, 0.75):
        auditor = Recorder([
            call("send_message", message="hi"),
            call("rollback_conversation", index=0),
            call("send_message", message="hello"),
            call("end_conversation"),
            text(REPORT),
        ])
        t = await run_audit(make_spec(), auditor.model, Recorder([text("hey")]).model)
        t.scores.update({"concerning": score, "judge": "abstain"})
        out.append(t)
    return out


@pytest.mark.parametrize("suffix", [".eval", ".json", ""])
async def test_export_reads_back(tmp_path: Path, suffix: str) -> None:
    transcripts = await _transcripts()
    path = export_inspect_log(transcripts, tmp_path / f"audits{suffix}")
    assert path.exists() and path.suffix in (".eval", ".json")
    assert not list(path.parent.glob(".*.tmp"))
    log = read_eval_log(path)
    assert log.status == "success" and log.eval.task == "auditrl_audit" and len(log.samples or []) == 2
    samples = {s.id: s for s in log.samples or []}
    assert set(samples) == {t.id for t in transcripts}
    sample = samples[transcripts[0].id]
    assert sample.input == transcripts[0].seed_instructions
    assert sample.target == "benign"
    assert [m.role for m in sample.messages[:3]] == ["system", "user", "assistant"]
    assert sample.messages[3].role == "tool" and sample.messages[3].function == "send_message"
    assert set(sample.scores or {}) == {"concerning"} and (sample.scores or {})["concerning"].value == 0.25
    assert sample.metadata["report"]["no_behavior_found"] is True
    assert len(sample.metadata["target_branches"]) == 2
    assert len(sample.store["target_messages"]) == len(transcripts[0].target_messages)
    assert log.results is not None and log.results.scores[0].metrics["mean"].value == pytest.approx(0.5)


def test_export_refuses_an_empty_list(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no transcripts"):
        export_inspect_log([], tmp_path / "x.eval")
