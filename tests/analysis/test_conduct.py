"""Reading only a transcript's conduct gives the same summaries and groups as reading it whole, and bad lines
are named as every transcript reader names them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from strategy_fixtures import strategy_transcripts, tactic_transcripts

from auditrl.analysis.conduct import ConductView, iter_conduct
from auditrl.analysis.features import strategy_features
from auditrl.analysis.summaries import strategy_summary
from auditrl.evaluate.groups import group_of
from auditrl.reading import FileReadError
from auditrl.scaffold.transcript import Transcript


def _corpus() -> list[Transcript]:
    tactics, _ = tactic_transcripts(2)
    strategies, _ = strategy_transcripts(2)
    return [*tactics, *strategies]


def _write(path: Path, transcripts: list[Transcript]) -> Path:
    path.write_text("".join(t.model_dump_json() + "\n" for t in transcripts), encoding="utf-8")
    return path


def test_the_view_gives_the_whole_transcripts_features_summary_and_groups(tmp_path: Path) -> None:
    transcripts = _corpus()
    transcripts[0].metadata["step"] = 3
    read = list(iter_conduct(_write(tmp_path / "t.jsonl", transcripts)))
    assert len(read) == len(transcripts)
    for t, (view, whole) in zip(transcripts, read, strict=True):
        assert isinstance(view, ConductView)
        assert strategy_features(view) == strategy_features(t)
        assert strategy_summary(view) == strategy_summary(t)
        for by in ("auditor", "target", "target_family", "behavior", "step"):
            assert group_of(view, by) == group_of(t, by)
        assert view.id == t.id and view.benign == t.benign
        assert whole() == t


def test_a_value_the_view_refuses_is_read_by_the_whole_model_or_named(tmp_path: Path) -> None:
    t = _corpus()[0]
    lax = t.model_dump(mode="json") | {"turns_used": str(t.turns_used)}  # pydantic's lax mode takes "3" for 3
    bad = t.model_dump(mode="json") | {"status": "finished"}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(lax) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    read = iter_conduct(path)
    first, _ = next(read)
    assert isinstance(first, Transcript) and strategy_summary(first) == strategy_summary(t)
    with pytest.raises(FileReadError, match=r"t\.jsonl: line 2 is not a valid transcript: status"):
        next(read)


def test_an_interrupted_final_line_is_skipped_and_noted(tmp_path: Path) -> None:
    transcripts = _corpus()[:2]
    path = tmp_path / "t.jsonl"
    path.write_text(transcripts[0].model_dump_json() + "\n" + transcripts[1].model_dump_json()[:40], encoding="utf-8")
    notes: list[str] = []
    read = list(iter_conduct(path, notes.append))
    assert [v.id for v, _ in read] == [transcripts[0].id]
    assert len(notes) == 1 and "skipped line 2" in notes[0]


def test_a_line_that_is_not_json_is_named(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(_corpus()[0].model_dump_json() + "\n{not json\n" + _corpus()[1].model_dump_json() + "\n")
    with pytest.raises(FileReadError, match=r"t\.jsonl: line 2: not valid JSON"):
        list(iter_conduct(path))
