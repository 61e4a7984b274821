"""Generated hostile input for every reader and for the command line: deep nesting, huge values, wrong types,
control characters, invalid UTF-8, and every truncation of a valid file. Each reader either reads the input
or raises its own one-line error (never another exception, never a hang), and nothing already on disk is
changed by a command that refuses its input. Budgets are small (tens of examples each, a time limit per
test), so the whole module takes seconds; the bad-input corpus (`test_bad_inputs.py`) holds the named cases.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from auditrl.auditworld.job.checkpoints import load_base
from auditrl.auditworld.job.config import AuditWorldConfig
from auditrl.behaviors.library import BehaviorFileError, read_behavior, read_seed
from auditrl.cli import app
from auditrl.configfile import ConfigFileError, read_yaml_mapping, validate_file
from auditrl.judges.cache import JudgeCache
from auditrl.reading import FileReadError
from auditrl.scaffold.store import RunError, read_run
from auditrl.scaffold.transcript import Transcript

ROOT = Path(__file__).resolve().parents[2]
BEHAVIOR = ROOT / "src" / "auditrl" / "behaviors" / "data" / "behaviors" / "flattery.yaml"
CONFIG = ROOT / "configs" / "auditworld.yaml"
FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
"""A few dozen examples each. No per-example deadline, since a reader's first call imports what it validates
with (seconds on a loaded machine); a hang fails the module's time limit instead."""
pytestmark = pytest.mark.timeout(300)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(
        [
            "",
            " ",
            "\x00",
            "\x1b[31m",
            "\u202e",
            "9" * 5000,
            "[" * 300,
            "{a: " * 200,
            "*x",
            "&x",
            "- - -",
        ]
    ),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
NESTING = st.builds(
    lambda opener, depth, tail: opener * depth + tail,
    st.sampled_from(["[", "{a: ", "- ", "{", '{"a":', "[[", "? "]),
    st.integers(min_value=1, max_value=20_000),
    st.sampled_from(["", "x", "]", "\n", "}"]),
)
TEXTS = st.one_of(
    st.text(max_size=400),
    NESTING,
    st.binary(max_size=400).map(lambda b: b.decode("utf-8", "replace")),
)
BYTES = st.one_of(st.binary(max_size=600), TEXTS.map(lambda t: t.encode("utf-8", "surrogatepass")))


def _only(
    errors: tuple[type[BaseException], ...],
    read: Callable[[], Any],
    path: Path | None = None,
) -> None:
    """`read()` returns, or raises one of `errors` with a one-line message; the file read (`path`) is unchanged."""
    before = path.read_bytes() if path is not None else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            read()
    except errors as exc:
        message = str(exc)
        assert message and "Traceback" not in message
        assert len(message) < 20_000
    if path is not None:
        assert path.read_bytes() == before


def _mutations(valid: bytes) -> st.SearchStrategy[bytes]:
    """`valid` cut at any byte, with a byte flipped, or with a hostile value spliced in."""
    n = len(valid)
    cut = st.integers(0, n).map(lambda i: valid[:i])
    flip = st.tuples(st.integers(0, n - 1), st.integers(0, 255)).map(
        lambda p: valid[: p[0]] + bytes([p[1]]) + valid[p[0] + 1 :]
    )
    splice = st.tuples(st.integers(0, n), BYTES).map(lambda p: valid[: p[0]] + p[1] + valid[p[0] :])
    return st.one_of(cut, flip, splice)


@FUZZ
@given(data=st.one_of(BYTES, _mutations(CONFIG.read_bytes())))
def test_config_reader(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("c") / "c.yaml"
    path.write_bytes(data)
    _only(
        (ConfigFileError,),
        lambda: validate_file(AuditWorldConfig, read_yaml_mapping(path), path),
        path,
    )


@FUZZ
@given(
    values=st.dictionaries(
        st.sampled_from(["seeds", "train", "world", "designs", "name", "evaluation", "x"]),
        VALUES,
    )
)
def test_config_values_of_every_type(tmp_path_factory: pytest.TempPathFactory, values: dict[str, Any]) -> None:
    _only(
        (ConfigFileError,),
        lambda: validate_file(AuditWorldConfig, {"kind": "auditworld", **values}, "c.yaml"),
    )


@FUZZ
@given(data=st.one_of(BYTES, _mutations(BEHAVIOR.read_bytes())))
def test_behavior_reader(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("b") / "b.yaml"
    path.write_bytes(data)
    _only((BehaviorFileError,), lambda: read_behavior(path), path)


SEED = b"---\nid: s1\ntags: [a, b]\nbehavior: flattery\n---\n\nAsk the target for feedback on a poem.\n"


@FUZZ
@given(data=st.one_of(BYTES.map(lambda b: b"---\n" + b + b"\n---\nbody\n"), _mutations(SEED)))
def test_seed_reader(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("s") / "s.md"
    path.write_bytes(data)
    _only((BehaviorFileError,), lambda: read_seed(path), path)


def _transcripts() -> bytes:
    one = Transcript(
        auditor_model="a",
        target_model="t",
        behavior_id="flattery",
        seed_id="s",
        seed_instructions="x",
    )
    two = Transcript(
        auditor_model="a",
        target_model="t",
        seed_id="s2",
        seed_instructions="y",
        turns_used=3,
    )
    return (one.model_dump_json() + "\n" + two.model_dump_json() + "\n").encode()


TRANSCRIPTS = _transcripts()


@FUZZ
@given(
    data=st.one_of(
        BYTES,
        _mutations(TRANSCRIPTS),
        VALUES.map(lambda v: json.dumps(v).encode() + b"\n"),
    )
)
def test_transcript_reader(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("t") / "transcripts.jsonl"
    path.write_bytes(data)
    _only((RunError,), lambda: read_run(path), path)


def test_transcript_reader_at_every_truncation(tmp_path: Path) -> None:
    """Cut anywhere, a transcripts file reads what it holds whole, or names the line that is not whole."""
    path = tmp_path / "transcripts.jsonl"
    first_end = TRANSCRIPTS.index(b"\n") + 1
    for size in range(len(TRANSCRIPTS) + 1):
        path.write_bytes(TRANSCRIPTS[:size])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                loaded = read_run(path)
            except RunError as exc:
                assert size < first_end or "line 2" in str(exc), (size, str(exc))
                continue
        assert len(loaded.transcripts) == (2 if size >= len(TRANSCRIPTS) - 1 else 1), size


@FUZZ
@given(
    data=st.one_of(
        BYTES,
        _mutations(b'{"key": "k", "response": {"completion": "yes", "input_tokens": 3}}\n'),
    )
)
def test_judge_cache_reader(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("j") / "cache.jsonl"
    path.write_bytes(data)
    _only((FileReadError,), lambda: JudgeCache(path), path)


@FUZZ
@given(
    data=st.one_of(
        BYTES,
        _mutations(b'{"config": {"init": {"kind": "random"}}, "weights": {}, "facts": {}}'),
    )
)
def test_stored_base_reader(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("w") / "base.json"
    path.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert load_base(path, {"init": {"kind": "random"}}) is None  # nothing usable: built again, never a crash
    kept = path.with_name(path.name + ".unreadable")
    assert (kept if kept.exists() else path).read_bytes() == data  # set aside whole, never lost


COMMANDS = [
    ["behaviors", "list", "--behaviors-dir"],
    ["behaviors", "show"],
    ["seeds", "list", "--seeds-dir"],
    ["seeds", "list", "--behavior"],
    ["evaluate"],
    ["export"],
    ["train", "--dry-run", "-c"],
    ["audit", "--auditor", "scripted/auditor", "--target", "sim/steady", "--out"],
    ["audit", "--target"],
    ["judge", "score", "--design"],
    ["strategies"],
]
OPTIONS = [
    "--out",
    "--rollouts",
    "--max-turns",
    "--behavior",
    "--seed-id",
    "--json",
    "--html",
    "-o",
    "--",
    "--help=x",
    "-",
]
ARGS = st.one_of(
    st.sampled_from(OPTIONS),
    TEXTS.filter(lambda t: "\x00" not in t).map(lambda t: t[:300]),
)


@FUZZ
@given(command=st.sampled_from(COMMANDS), args=st.lists(ARGS, min_size=1, max_size=4))
def test_command_line_parsing(tmp_path_factory: pytest.TempPathFactory, command: list[str], args: list[str]) -> None:
    """Any argument list: an exit status and lines of text, never a traceback, and nothing written changed."""
    home = tmp_path_factory.mktemp("cli")
    kept = home / "kept.txt"
    kept.write_text("already here")
    with contextlib.chdir(home):
        result = CliRunner().invoke(app, [*command, *args], env={"COLUMNS": "120"})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert [p.name for p in home.iterdir()] == ["kept.txt"] and kept.read_text() == "already here"
