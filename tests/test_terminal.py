"""What a command prints while models run: a line per local generation in an audit, third-party noise turned down."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from io import StringIO
from pathlib import Path

import pytest
from inspect_ai.model import ModelOutput, ModelUsage
from rich.console import Console

from auditrl import terminal


def _output(prompt: int, new: int) -> ModelOutput:
    out = ModelOutput.from_content(model="m", content="x")
    out.usage = ModelUsage(input_tokens=prompt, output_tokens=new, total_tokens=prompt + new)
    return out


async def _generate(prompt: int, new: int) -> ModelOutput:
    return _output(prompt, new)


def test_each_local_generation_in_an_audit_prints_its_audit_turn_role_and_speed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    buf = StringIO()
    monkeypatch.setattr(terminal, "_console", Console(file=buf, width=200))

    async def audit() -> None:
        terminal.at_audit(2, 3, max_turns=2)
        for _ in range(3):  # two turns and the report
            with terminal.calling("auditor"):
                await terminal.reported("smollm2", _generate(100, 8))
            with terminal.calling("target"):
                await terminal.reported("smollm2", _generate(50, 4))
        with terminal.calling("judge"):
            await terminal.reported("smollm2", _generate(70, 2))

    async def main() -> None:
        await asyncio.gather(audit(), terminal.reported("smollm2", _generate(1, 1)))  # outside an audit: no line

    asyncio.run(main())
    lines = buf.getvalue().splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "audit 2/3 · turn 1/2 · auditor local/smollm2",
        "audit 2/3 · turn 1/2 · target local/smollm2",
        "audit 2/3 · turn 2/2 · auditor local/smollm2",
        "audit 2/3 · turn 2/2 · target local/smollm2",
        "audit 2/3 · report · auditor local/smollm2",
        "audit 2/3 · report · target local/smollm2",
        "audit 2/3 · judge local/smollm2",
    ]
    assert "100 prompt + 8 new tokens in " in lines[0] and lines[0].endswith(" tokens/s)")


def test_nothing_is_printed_until_a_command_turns_reporting_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(terminal, "_console", None)

    async def audit() -> None:
        terminal.at_audit(1, 1, max_turns=1)
        with terminal.calling("auditor"):
            await terminal.reported("smollm2", _generate(1, 1))

    asyncio.run(audit())
    assert capsys.readouterr() == ("", "")


NOISE = textwrap.dedent(
    """
    import logging, sys, warnings
    from auditrl import terminal
    order = sys.argv[1]
    if order == "imported-first":
        import transformers.utils.logging, tqdm
    terminal.configure(verbose=sys.argv[2] == "verbose")
    import tqdm
    from transformers.utils import logging as hf_logging
    hf_logging.get_logger("transformers.modeling_utils").warning("LOAD REPORT")
    logging.getLogger("peft.tuners").warning("PEFT NOTICE")
    warnings.warn_explicit("TRL EXPERIMENTAL", UserWarning, "trl/trainer.py", 1, module="trl.trainer")
    warnings.warn_explicit("TORCH DEPRECATION", FutureWarning, "torch/nn.py", 1, module="torch.nn")
    for _ in tqdm.tqdm(range(3), desc="GGUF BAR"):
        pass
    for _ in hf_logging.tqdm(range(3), desc="WEIGHTS BAR"):
        pass
    warnings.warn_explicit("OUR OWN WARNING", UserWarning, "auditrl/store.py", 1, module="auditrl.scaffold.store")
    """
)
THIRD_PARTY = ("LOAD REPORT", "PEFT NOTICE", "TRL EXPERIMENTAL", "TORCH DEPRECATION", "GGUF BAR", "WEIGHTS BAR")


@pytest.mark.parametrize("order", ["configured-first", "imported-first"])
def test_third_party_logs_warnings_and_bars_are_quiet_unless_verbose(order: str, tmp_path: Path) -> None:
    """GGUF, TRL and peft notices filled stderr between audits; only errors (and our own warnings) remain."""
    env = {k: v for k, v in os.environ.items() if k not in terminal.QUIET_ENV}

    def stderr(mode: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", NOISE, order, mode], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stderr

    quiet, verbose = stderr("quiet"), stderr("verbose")
    assert [n for n in THIRD_PARTY if n in quiet] == [] and "OUR OWN WARNING" in quiet
    assert [n for n in THIRD_PARTY if n not in verbose] == []


@pytest.mark.slow
def test_a_local_audit_shows_each_turn_and_no_library_noise(tiny_local_model: Path, tmp_path: Path) -> None:
    """The SmolLM2 tour audit printed nothing for minutes between audits while library noise filled stderr."""
    env = {k: v for k, v in os.environ.items() if k not in terminal.QUIET_ENV}
    model = f"local/{tiny_local_model}"

    args = ["--auditor", model, "--target", model, "--behavior", "flattery", "--rollouts", "2", "--concurrency", "2",
            "--max-turns", "2", "--max-tokens", "4", "--no-inspect-log", "--out", str(tmp_path / "run")]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "auditrl.cli", "audit", *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    for k in (1, 2):
        for where in ("turn 1/2 · auditor", "turn 1/2 · target", "turn 2/2 · auditor", "report · auditor"):
            assert any(line.startswith(f"audit {k}/2 · {where} {model}: ") and "tokens/s" in line for line in lines), (
                k,
                where,
                lines,
            )
    assert all(line.startswith("audit ") for line in lines), (
        done.stderr
    )  # no weight-loading bars or notices around them
