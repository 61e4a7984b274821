"""Every malformed input in the corpus gets a clear error naming what is wrong, and loses nothing.

The corpus (`bad_inputs/`) holds configs, behavior and seed files, transcripts, run directories and command
lines, with `cases.yaml` saying which command reads each one and what its error must name. YAML alias bombs
among them hung the commands that read them before aliases were refused; the test would then time out.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from auditrl.cli import app

CORPUS = Path(__file__).parent / "bad_inputs"
CASES: list[dict[str, Any]] = yaml.safe_load((CORPUS / "cases.yaml").read_text(encoding="utf-8"))
_FRAME = re.compile(r"[│╭╮╰╯─]+")
_NAMED = re.compile(r"\{dir\}(/[^\s,=]+)?")


def _copy_named(args: list[str], root: Path) -> None:
    """Copy into `root` the corpus paths the command lines name (all of it where one names `{dir}` itself): each
    case copies a few files, not the whole corpus, and leaves a few to clean up. Of a name the corpus lacks (a
    missing or over-long path, or one under a file, named on purpose), the part it has is copied."""
    named = {m.group(1) for arg in args for m in _NAMED.finditer(arg)}
    if None in named:
        shutil.copytree(CORPUS, root)
        return
    root.mkdir()
    for name in sorted(named):
        source = CORPUS
        for part in name.strip("/").split("/"):
            if source.is_file() or part not in {p.name for p in source.iterdir()}:
                break
            source = source / part
        copy = root / source.relative_to(CORPUS)
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_file():
            shutil.copy2(source, copy)
        elif not copy.exists():
            shutil.copytree(source, copy)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _flat(text: str) -> str:
    """Output without rich's box frames and line wrapping, so a message reads as one line."""
    return " ".join(_FRAME.sub(" ", text).split())


ERROR_CHARS = 2000
"""A clear error is short: values from the input are cut before they are shown, however large the file made them."""


def test_corpus_is_large_and_ids_are_unique() -> None:
    ids = [case["id"] for case in CASES]
    assert len(ids) >= 200 and len(set(ids)) == len(ids)


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_bad_input_gets_a_clear_error(case: dict[str, Any], tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    _copy_named(case["args"], root)
    before = _snapshot(root)
    args = [arg.replace("{dir}", str(root)) for arg in case["args"]]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
    output = _flat(result.output)
    assert result.exit_code != 0, output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert len(output) < ERROR_CHARS, f"{len(output)} characters: {output[:300]}..."
    for expected in case["expect"]:
        assert _flat(expected) in output, f"{expected!r} not in: {output}"
    for secret in case.get("absent", []):
        assert secret not in result.output
    after = _snapshot(root)
    assert {name: after.get(name) for name in before} == before, "a file that existed was changed or removed"
