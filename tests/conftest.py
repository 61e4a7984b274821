"""Fixtures shared across test packages."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# pytest-xdist starts its workers with COLUMNS=80 and LINES=24 in the environment. A CLI module's console made at
# import would keep that width, so a test that sets COLUMNS for one command would see 80 columns under xdist only.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

_STARTED = time.perf_counter()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """`make test` states its own cost: wall time, the CPU time of this process and the workers it waited for,
    and the CPU it ran on (torch's capability string), so a suite's duration is read against its machine."""
    import torch

    times = os.times()
    cpu = times.user + times.system + times.children_user + times.children_system
    terminalreporter.write_line(
        f"suite: {time.perf_counter() - _STARTED:.0f} s wall since the tests were loaded, "
        f"{cpu:.0f} CPU-s (this process and finished workers), "
        f"CPU capability {torch.backends.cpu.get_cpu_capability()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}"
    )


@pytest.fixture(autouse=True)
def _no_refusals_across_tests() -> Iterator[None]:
    """A model refused in one test (a scripted 401) is not refused in the next: each test is its own run."""
    yield
    retries = sys.modules.get("auditrl.models.retries")
    if retries is not None:
        retries.forget_refusals()


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2's tokenizer saved once in plain form (fast to reload), for the trainer tests and the tiny policy."""
    from transformers import AutoTokenizer

    from auditrl.models.local import dense_source, smollm2_source

    folder = tmp_path_factory.mktemp("smollm2-tokenizer")
    AutoTokenizer.from_pretrained(dense_source(smollm2_source()).location).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_local_model(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Path:
    """A one-layer random Llama over SmolLM2's tokenizer and chat template, saved as a directory `local/<dir>` and
    `policy.model` load in a second: the whole language-model path runs on it (the tokens it writes are noise)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=8192, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
    )  # fmt: skip
    folder = tmp_path_factory.mktemp("tiny-local")
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_implant(tmp_path_factory: pytest.TempPathFactory, tiny_local_model: Path) -> Path:
    """An implant directory of `flattery` on the tiny model, as `auditrl implant` saves one (peft adapter, tokenizer,
    `implant.json`), with a fresh adapter and no training: for the code that reads implants, not their behavior."""
    from auditrl.models.lora import LoraSettings
    from auditrl.targets.implant import ImplantSettings, new_implant, save_implant
    from auditrl.targets.record import ImplantRecord, write_record

    base = f"local/{tiny_local_model}"
    model, tokenizer, _ = new_implant(base, ImplantSettings(lora=LoraSettings(r=4, alpha=8)))
    folder = tmp_path_factory.mktemp("tiny-implant")
    save_implant(model, tokenizer, base, folder)
    record = ImplantRecord(
        behavior="flattery", base=base, demo_model="scripted/none", demonstrations=0, denials=0, steps=0, seconds=0.0
    )
    write_record(folder, record)
    return folder
