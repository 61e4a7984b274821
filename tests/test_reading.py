"""One reader per file kind: bounded size and nesting (the limit named), no duplicate keys, values taken as
written, unknown keys with a did-you-mean, extensions in any case and skipped files named. A test per class."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pytest
from pydantic import Field
from typer.testing import CliRunner

from auditrl.behaviors.library import (
    BehaviorFileError,
    SkippedFilesWarning,
    load_behaviors,
    load_seeds,
    read_seed,
)
from auditrl.cli import app
from auditrl.configfile import (
    YAML_DEPTH,
    ConfigFileError,
    ConfigModel,
    load_yaml,
    read_yaml_mapping,
    validate_file,
)
from auditrl.judges.cache import CachedResponse, CacheWarning, JudgeCache
from auditrl.reading import (
    CONFIG,
    JSON_DEPTH,
    FileKind,
    FileReadError,
    parse_json,
    read_bytes,
    read_text,
)

BEHAVIORS = Path(__file__).resolve().parents[1] / "src" / "auditrl" / "behaviors" / "data" / "behaviors"


class _Train(ConfigModel):
    max_steps: int = 10
    learning_rate: float = 0.1
    resume: bool = False
    seeds: list[int] = Field(default_factory=lambda: [0])
    limit: int | None = None


class _Config(ConfigModel):
    train: _Train = _Train()


def test_a_file_past_its_kind_limit_is_refused_before_it_is_read_whole(
    tmp_path: Path,
) -> None:
    start = time.process_time()
    with pytest.raises(FileReadError, match=r"/dev/zero: larger than the 4 MiB limit for a config file"):
        read_yaml_mapping(Path("/dev/zero"))
    assert time.process_time() - start < 2.0
    small = FileKind("a test file", 8)
    (tmp_path / "ok").write_bytes(b"12345678")
    (tmp_path / "big").write_bytes(b"123456789")
    assert read_bytes(tmp_path / "ok", small) == b"12345678"
    with pytest.raises(FileReadError, match="big: larger than the 8 bytes limit for a test file"):
        read_bytes(tmp_path / "big", small)
    (tmp_path / "latin1").write_bytes(b"caf\xe9")
    with pytest.raises(FileReadError, match=r"latin1: byte 3 is not UTF-8 \(0xe9\)"):
        read_text(tmp_path / "latin1", CONFIG)


def test_train_config_from_dev_zero_fails_fast_naming_the_limit() -> None:
    result = CliRunner().invoke(app, ["train", "--config", "/dev/zero"])
    assert result.exit_code == 2
    assert "larger than the 4 MiB limit for a config file" in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize("opening", ["[", "{a: ", "- "])
def test_nesting_past_the_limit_is_refused_naming_it(opening: str) -> None:
    deep = opening * 100_000
    with pytest.raises(ConfigFileError, match=f"nested deeper than {YAML_DEPTH} levels"):
        load_yaml(deep, "deep.yaml")
    assert load_yaml("[" * 10 + "]" * 10, "ok.yaml") == [[[[[[[[[[]]]]]]]]]]
    with pytest.raises(FileReadError, match=f"nested deeper than {JSON_DEPTH} levels"):
        parse_json("[" * 100_000, "deep.json")


def test_a_key_written_twice_is_refused_naming_both_lines() -> None:
    with pytest.raises(
        ConfigFileError,
        match=r"c\.yaml: line 3, column 3: .*key 'max_steps' is written twice \(first on line 2\)",
    ):
        load_yaml("train:\n  max_steps: 5\n  max_steps: 6\n", "c.yaml")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "max_steps: true",
            "field 'train.max_steps': a bool is not a number (got True)",
        ),
        (
            'max_steps: "2"',
            "field 'train.max_steps': a quoted number is not a number (got '2')",
        ),
        (
            'learning_rate: "0.1"',
            "field 'train.learning_rate': a quoted number is not a number",
        ),
        ("resume: 1", "field 'train.resume': expected true or false, got 1"),
        ('resume: "yes"', "field 'train.resume': expected true or false, got 'yes'"),
        ("seeds: [0, false]", "field 'train.seeds': item 1: a bool is not a number"),
        ('limit: "3"', "field 'train.limit': a quoted number is not a number"),
    ],
)
def test_values_are_taken_as_written_never_coerced(text: str, problem: str) -> None:
    with pytest.raises(ConfigFileError) as info:
        validate_file(_Config, load_yaml(f"train:\n  {text}\n"), "c.yaml")
    assert str(info.value).startswith("c.yaml: ") and problem in str(info.value)


def test_numbers_written_as_numbers_are_numbers() -> None:
    cfg = validate_file(
        _Config,
        load_yaml("train: {max_steps: 3, learning_rate: 1e-5, resume: false, limit: null}"),
        "c",
    )
    assert (cfg.train.max_steps, cfg.train.learning_rate, cfg.train.limit) == (
        3,
        1e-5,
        None,
    )


def test_an_unknown_key_is_refused_with_a_did_you_mean() -> None:
    with pytest.raises(
        ConfigFileError,
        match=r"field 'train.max_step': unknown field \(did you mean 'max_steps'\?\)",
    ):
        validate_file(_Config, {"train": {"max_step": 3}}, "c.yaml")
    with pytest.raises(
        ConfigFileError,
        match=r"field 'trian': unknown field \(did you mean 'train'\?\)",
    ):
        validate_file(_Config, {"trian": {}}, "c.yaml")


def _seed(path: Path, front: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{front}\n---\nProbe the target.\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("key", "known"),
    [("behaviour", "behavior"), ("tag", "tags"), ("Behavior", "behavior")],
)
def test_a_front_matter_key_near_a_known_one_is_refused_with_a_did_you_mean(
    tmp_path: Path, key: str, known: str
) -> None:
    path = _seed(tmp_path / "s.md", f"{key}: flattery")
    with pytest.raises(
        BehaviorFileError,
        match=f"field '{key}': unknown front matter key \\(did you mean '{known}'\\?\\)",
    ):
        read_seed(path)
    assert read_seed(_seed(tmp_path / "t.md", "origin: petri")).model_extra == {"origin": "petri"}


def test_extensions_match_in_any_case_and_skipped_files_are_named(
    tmp_path: Path,
) -> None:
    text = (BEHAVIORS / "flattery.yaml").read_text(encoding="utf-8")
    (tmp_path / "x.YAML").write_text(text.replace("id: flattery", "id: upper_case"), encoding="utf-8")
    (tmp_path / "y.yaml").write_text(text.replace("id: flattery", "id: lower_case"), encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not a behavior", encoding="utf-8")
    (tmp_path / ".DS_Store").write_bytes(b"\x00")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = load_behaviors([tmp_path], include_builtin=False)
    assert set(found) == {"upper_case", "lower_case"}
    notes = [str(w.message) for w in caught if issubclass(w.category, SkippedFilesWarning)]
    assert len(notes) == 1 and "skipped 1 file(s) not ending in .yaml or .yml: notes.txt" in notes[0]
    _seed(tmp_path / "seeds" / "S.MD", "id: upper\ntags: [a]")
    assert [s.id for s in load_seeds([tmp_path / "seeds"], include_builtin=False)] == ["upper"]


def test_a_judge_cache_line_that_is_not_an_entry_is_left_out_with_a_warning(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cache.jsonl"
    JudgeCache(path).put("k1", CachedResponse(completion="yes"))
    with path.open("ab") as handle:
        handle.write(
            b'{"key": "k2", "response": {"completion": "x", "input_tokens": -3}}\n' + b"[" * 10_000 + b"\n{torn"
        )
    with pytest.warns(
        CacheWarning,
        match=r"cache\.jsonl: left out 3 line\(s\) that are not judge cache entries \(line 2, 3, 4\)",
    ):
        cache = JudgeCache(path)
    assert len(cache) == 1 and cache.get("k1") == CachedResponse(completion="yes")
