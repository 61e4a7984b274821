"""The README's shell blocks run as written: every block of its Quick start and every block marked as runnable
offline, in order, in a fresh directory holding a copy of the repository's configs, at COLUMNS=80; and its
one-file provider plays a target."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from auditrl.cli import app
from auditrl.scaffold.store import read_transcripts

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARK = "<!-- runs offline: tests/test_readme.py -->"
BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)
SHELL_SYNTAX = "|&;<>()"
"""Characters of pipes, redirections, lists and subshells: a README block holds simple commands only."""
EXPANSIONS = "$`*?~"
"""Characters bash would expand (variables, command substitution, globs, home): none in a README command."""


def runnable_blocks(text: str) -> list[str]:
    """Every bash block of the Quick start section, then each bash block right after the marker, in README order."""
    quick = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    start = text.index(quick)
    spans = [(start + m.start(), m.group(1)) for m in BLOCK.finditer(quick)]
    spans += [(m.start(), m.group(1)) for m in re.finditer(re.escape(MARK) + r"\n```bash\n(.*?)```", text, re.DOTALL)]
    return [block for _, block in sorted(spans)]


def output_paths(block: str) -> list[str]:
    """What the block's commands name after --out, --html and --json: each must exist once the block ran."""
    return re.findall(r"--(?:out|html|json|log-dir)\s+(\S+)", block)


def test_the_readme_marks_its_runnable_blocks() -> None:
    text = README.read_text(encoding="utf-8")
    blocks = runnable_blocks(text)
    assert len(blocks) >= 3 and any("auditrl audit" in block for block in blocks)
    assert len(re.findall(re.escape(MARK) + r"\n```bash\n", text)) == text.count(MARK) >= 2, (
        "each marker sits right above a bash block"
    )
    assert len(text.splitlines()) <= 500, "the README is the front door: at most 500 lines"
    assert "## Auditing real models" in "\n".join(text.splitlines()[:150]), (
        "how to audit a real model is in the first 150 lines"
    )


def block_commands(block: str) -> list[list[str]]:
    """A block's commands as bash reads them: continuation lines joined, comments dropped, quotes removed."""
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split, lexer.commenters = True, "#"
        words = list(lexer)
        assert not any(w and set(w) <= set(SHELL_SYNTAX) for w in words), f"more than simple commands: {line}"
        assert not any(c in EXPANSIONS for w in words for c in w), f"more than simple commands: {line}"
        if words:
            commands.append(words)
    return commands


def test_a_block_is_read_as_bash_reads_it() -> None:
    block = "auditrl a --x 1 \\\n    --y 'p q'   # a comment\n\ninspect b -T k=v\n"
    assert block_commands(block) == [["auditrl", "a", "--x", "1", "--y", "p q"], ["inspect", "b", "-T", "k=v"]]
    with pytest.raises(AssertionError, match="more than simple commands"):
        block_commands("auditrl a > out.txt\n")
    with pytest.raises(AssertionError, match="more than simple commands"):
        block_commands("auditrl a --out $HOME/runs\n")


def test_every_runnable_readme_block_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each `auditrl` line runs in this process (the console script, checked to start, is `auditrl.cli:app`; a fresh
    interpreter per line would cost seconds of imports each), each `inspect` line in its own process."""
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    monkeypatch.chdir(tmp_path)
    bin_dir = Path(sys.executable).parent
    # The package as this environment installed it (editable): a src folder put ahead of site-packages would make
    # inspect read the build's egg-info, which is not marked editable, and miss the `auditrl/` task namespace.
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "COLUMNS": "80",
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    (script,) = importlib.metadata.entry_points(group="console_scripts", name="auditrl")
    assert script.value == "auditrl.cli:app", "the auditrl on PATH is the app run here"
    shown = subprocess.run([str(bin_dir / "auditrl"), "--help"], env=env, capture_output=True, text=True, check=False)
    assert shown.returncode == 0 and "Usage" in shown.stdout, shown.stderr[-3000:]
    for block in runnable_blocks(README.read_text(encoding="utf-8")):
        for words in block_commands(block):
            line = shlex.join(words)
            assert words[0] in ("auditrl", "inspect"), f"a README line runs something else: {line}"
            if words[0] == "inspect":
                done = subprocess.run(
                    [str(bin_dir / "inspect"), *words[1:]], env=env, capture_output=True, text=True, check=False
                )
                assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
                assert "Traceback" not in done.stderr, f"{line}\n{done.stderr[-3000:]}"
            else:
                result = CliRunner().invoke(app, words[1:], env={"COLUMNS": "80"})
                assert result.exit_code == 0, f"{line}\n{result.output[-3000:]}"
                assert "Traceback" not in result.output, f"{line}\n{result.output[-3000:]}"
        for path in output_paths(block):
            assert (tmp_path / path).exists(), f"{block}: nothing at {path}"


def test_the_readme_provider_file_plays_a_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = next(
        b
        for b in re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
        if b.startswith("# my_provider.py")
    )
    path = tmp_path / "my_provider.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("my_provider", path)
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    monkeypatch.chdir(tmp_path)
    words = [
        "audit",
        "--auditor",
        "scripted/auditor",
        "--target",
        "echo/any",
        "--behavior",
        "flattery",
        "--max-turns",
        "2",
        "--out",
        "runs/echo",
    ]
    result = CliRunner().invoke(app, words, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    (audit,) = read_transcripts(tmp_path / "runs" / "echo" / "transcripts.jsonl")
    assert audit.target_model == "echo/any" and audit.status != "error"
    sent = [m.content for m in audit.target_messages if m.role == "user"]
    assert sent and next(m.content for m in audit.target_said()) == sent[0], (
        "the provider answered with what it was sent"
    )
