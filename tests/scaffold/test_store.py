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
    assert loaded.files == [tmp_path / TRANSCRIPTS] and loaded.scored_files == [
        tmp_path / "transcripts.scored-binary.jsonl"
    ]
    plain = read_run(tmp_path)
    assert [t.scores for t in plain.transcripts] == [{}, {}] and plain.scored_files == []


def test_a_run_without_transcripts_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="no transcripts"):
        read_run(tmp_path)
    with pytest.raises(RunError, match="no such file"):
        read_run(tmp_path / "missing")


@pytest.mark.parametrize("newline", [b"", b"\n"])
def test_a_whole_json_line_of_the_wrong_shape_is_an_error_with_or_without_its_newline(
    tmp_path: Path, newline: bytes
) -> None:
    path = tmp_path / "t.jsonl"
    append_transcript(path, _t("s1"))
    with path.open("ab") as handle:
        handle.write(b'{"id": "x", "seed_id": 3}' + newline)
    with pytest.raises(ValueError, match=r"t\.jsonl: line 2 is not a valid transcript"):
        read_transcripts(path)
    if not newline:
        with pytest.raises(ValueError, match=r"t\.jsonl: the last line is JSON but not a transcript"):
            append_transcript(path, _t("s2"))  # never set aside as if it were an interrupted write
    assert path.read_bytes().endswith(b'{"id": "x", "seed_id": 3}' + newline)


@pytest.mark.parametrize(
    ("field", "value"), [("turns_used", -5), ("auditor_tokens", -1), ("turns_used", "many"), ("status", "bogus")]
)
def test_a_value_no_audit_can_have_is_an_error_naming_file_line_and_value(
    tmp_path: Path, field: str, value: object
) -> None:
    path = tmp_path / "t.jsonl"
    bad = _t("s1").model_copy(update={field: value})
    path.write_text(_t("s0").model_dump_json() + "\n" + bad.model_dump_json(warnings=False) + "\n")
    with pytest.raises(RunError, match=rf"t\.jsonl: line 2 is not a valid transcript: {field}: .*\(got {value!r}\)"):
        read_run(path)


def test_repeated_transcripts_are_counted_and_a_different_one_under_the_same_id_is_an_error(tmp_path: Path) -> None:
    run = tmp_path / "run"
    one, two = _t("s1"), _t("s2")
    write_transcripts(run / TRANSCRIPTS, [one, two, one, two, one])
    loaded = read_run(run)
    assert [t.id for t in loaded.transcripts] == [one.id, two.id]
    summary = loaded.describe()
    assert "read 2 transcript(s)" in summary and "excluded 3 (3 repeated copies of one transcript)" in summary
    other = _t("s9").model_copy(update={"id": one.id})
    write_transcripts(run / TRANSCRIPTS, [one, two, other])
    with pytest.raises(RunError, match=rf"transcript 3 has id '{one.id}', as has a different transcript"):
        read_run(run)


def test_a_transcript_of_an_unknown_behavior_is_a_counted_exclusion(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    known = _t("s1").model_copy(update={"behavior_id": "flattery"})
    write_transcripts(path, [known, _t("s2").model_copy(update={"behavior_id": "no_such_behavior"}), _t("s3")])
    loaded = read_run(path)
    assert [t.seed_id for t in loaded.transcripts] == ["s1", "s3"]
    assert "excluded 1 (1 of unknown behavior 'no_such_behavior')" in loaded.describe()
