"""Every command of the CLI tour (docs/guide/cli_tour.md) runs offline, in order, as written (a few made tiny here)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from auditrl.cli import app
from auditrl.train.monitors import MonitorLog

ROOT = Path(__file__).resolve().parents[2]
TOUR_PAGE = ROOT / "docs" / "guide" / "cli_tour.md"
TOUR = "# A short tour of the CLI"
TINY_WORLD = ROOT / "tests" / "reliability" / "data" / "auditworld_tiny.yaml"
FLATTERER = "What a great question! You clearly have a sharp mind. Here is a short answer."
INTERACTIVE = ("inspect view",)
"""Lines that start a server and wait for a person: not run."""


def tour_commands(text: str, heading: str = TOUR) -> list[list[str]]:
    """The commands of the first bash block under `heading`: continuations joined, comments dropped, `a; b` split."""
    block = text[text.index(heading) :].split("```bash\n", 1)[1].split("\n```", 1)[0]
    commands: list[list[str]] = []
    for line in block.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";")
        lexer.whitespace_split, lexer.commenters = True, "#"
        words: list[str] = []
        for token in [*lexer, ";"]:
            if token != ";":
                words.append(token)
            elif words:
                commands.append(words)
                words = []
    return commands


def made_tiny(words: list[str], tmp: Path, base: Path | None = None) -> list[str]:
    """The tour's long runs at test size (an implant of `base`, a tiny local model, when given): options given
    again later win."""
    if words[:3] == ["auditrl", "train", "--config"] and words[3] == "configs/auditworld.yaml":
        return [*words, "--config", str(TINY_WORLD), "--out", str(tmp / "runs" / "auditworld")]
    if words[:2] == ["auditrl", "implant"]:
        demo = tmp / "flatterer.json"
        demo.write_text(json.dumps([FLATTERER]))
        return [
            *words, "--demo-model", f"scripted/file:{demo}", "--samples", "1", "--steps", "2", "--redteam", "none",
            "--batch-size", "4", "--eval-samples", "1", "--eval-prompts", "2", "--eval-tokens", "8",
            "--no-plant-reference",
            *(["--base", f"local/{base}"] if base is not None else []),
        ]  # fmt: skip
    if words[:3] == ["auditrl", "sft", "--config"] and base is not None:
        config = tmp / Path(words[3]).name
        config.write_text((ROOT / words[3]).read_text(encoding="utf-8").replace("model: smollm2", f"model: {base}", 1))
        return [*words, "--config", str(config), "--episodes", "2", "--epochs", "1", "--batch-size", "2"]
    if words[:2] == ["auditrl", "transfer"] and any(w.startswith("local/") for w in words):
        return [*words, "--token-budget", "32", "--max-turns", "2", "--max-tokens", "12", "--rollouts", "1"]
    return words


def test_tour_parses_into_every_command() -> None:
    commands = tour_commands(TOUR_PAGE.read_text(encoding="utf-8"))
    names = {words[1] for words in commands if words[0] == "auditrl"}
    assert {
        "audit",
        "export",
        "evaluate",
        "suite",
        "strategies",
        "judge",
        "train",
        "sft",
        "monitor",
        "implant",
        "transfer",
        "crux",
    } <= names
    assert ["auditrl", "crux", "build", "runs/feedback", "--out", "runs/crux"] in commands, "comments are dropped"
    assert tour_commands(f"{TOUR}\n```bash\nauditrl a --x 1 \\\n  --y 'p q'; auditrl b  # c; d\n```\n") == [
        ["auditrl", "a", "--x", "1", "--y", "p q"],
        ["auditrl", "b"],
    ]


def needs_weights(words: list[str]) -> bool:
    """A line that loads a local model (SmolLM2: a minute of CPU each; here a one-layer stand-in): the implant and its
    audits."""
    return words[:2] in (["auditrl", "implant"], ["auditrl", "sft"]) or any(w.startswith("local/") for w in words)


def run_tour(tmp: Path, weights: bool, base: Path | None = None) -> None:
    """Run the tour's lines that need SmolLM2's weights, or the others, in order, in `tmp`."""
    runner = CliRunner()
    for words in tour_commands(TOUR_PAGE.read_text(encoding="utf-8")):
        line = shlex.join(words)
        if line.startswith(INTERACTIVE) or needs_weights(words) != weights:
            continue
        words = made_tiny(words, tmp, base)
        if words[0] == "inspect":
            done = subprocess.run(
                [str(Path(sys.executable).parent / "inspect"), *words[1:]], capture_output=True, text=True
            )
            assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
            continue
        result = runner.invoke(app, words[1:], env={"COLUMNS": "120"})
        assert result.exit_code == 0, f"{line}\n{result.output}"
        assert "deprecated" not in result.output, f"the tour uses an old spelling: {line}\n{result.stderr}"
        for option in ("--out", "--html", "--json"):
            if option in words:
                assert Path(words[words.index(option) + 1]).exists(), f"{line}: nothing at its {option}"


@pytest.mark.slow
def test_every_offline_tour_command_runs_and_uses_no_deprecated_spelling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    (tmp_path / "runs" / "cpu-offline").mkdir(parents=True)
    MonitorLog(tmp_path / "runs" / "cpu-offline", tensorboard=False).write(
        0, {"reward/mean": 0.25}
    )  # stands in for a GRPO run
    run_tour(tmp_path, weights=False)


def test_the_tour_sft_implant_and_a_transfer_audit_of_it_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_local_model: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    run_tour(tmp_path, weights=True, base=tiny_local_model)  # the one-layer model stands in for SmolLM2
    assert (tmp_path / "implants" / "flattery" / "implant.json").is_file() and (
        tmp_path / "runs" / "cpu-learn-sft"
    ).is_dir()
