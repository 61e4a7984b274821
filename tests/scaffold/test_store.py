"""Append-only JSONL transcripts: round trip, crash-truncated last line, corrupt lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditrl.scaffold.store import (
    TRANSCRIPTS,
    RunError,
    append_transcript,
    read_run,
    read_transcripts,
    write_transcripts,
)
from auditrl.scaffold.transcript import TargetMessage, Transcript


def _t(seed: str) -> Transcript:
    t = Transcript(auditor_model="a", target_model="t", seed_id=seed, seed_instructions="x")
    t.target_messages.append(TargetMessage(id="m1", parent=None, role="assistant", content="hi\nthere"))
    return t


def test_append_and_read_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "transcripts.jsonl"
    written = [_t("s1"), _t("s2"), _t("s3")]
    for t in written:
        append_transcript(path, t)
    assert path.read_text().count("\n") == 3
    assert read_transcripts(path) == written


def test_truncated_last_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    append_transcript(path, _t("s1"))
    append_transcript(path, _t("s2"))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])
    with pytest.warns(UserWarning, match="line 2"):
        got = read_transcripts(path)
    assert [t.seed_id for t in got] == ["s1"]


def test_corrupt_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    append_transcript(path, _t("s1"))
    with path.open("a") as f:
        f.write('{"not": "a transcript"}\n')
    append_transcript(path, _t("s3"))
    with pytest.raises(ValueError, match=r"t\.jsonl: line 2 is not a valid transcript"):
        read_transcripts(path)


def test_a_scored_copy_is_merged_only_when_asked_for(tmp_path: Path) -> None:
    originals = [_t("s1"), _t("s2")]
    for t in originals:
        append_transcript(tmp_path / TRANSCRIPTS, t)
    scored = [t.model_copy(update={"scores": {"binary": {"reward": 1.0}}}) for t in originals]
    write_transcripts(tmp_path / "transcripts.scored-binary.jsonl", scored[:1])
    loaded = read_run(tmp_path, scored="binary")
    assert [t.id for t in loaded.transcripts] == [t.id for t in originals]
    assert loaded.transcripts[0].scores == {"binary": {"reward": 1.0}} and loaded.transcripts[1].scores == {}
    assert loaded.files == [tmp_path / TRANSCRIPTS] and loaded.scored_files == [tmp_path / "transcripts.scored-binary.jsonl"]
    plain = read_run(tmp_path)
    assert [t.scores for t in plain.transcripts] == [{}, {}] and plain.scored_files == []


def test_a_run_without_transcripts_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="no transcripts"):
        read_run(tmp_path)
    with pytest.raises(RunError, match="no such file"):
        read_run(tmp_path / "missing")
