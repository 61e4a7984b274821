"""Shared fixtures for the trainer tests: SmolLM2's tokenizer saved once in plain form (fast to reload)."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from auditrl.models.local import dense_source, smollm2_source


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = smollm2_source()
    tokenizer = AutoTokenizer.from_pretrained(dense_source(source).location)
    folder = tmp_path_factory.mktemp("smollm2-tokenizer")
    tokenizer.save_pretrained(folder)
    return folder
