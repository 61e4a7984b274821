"""Shared helpers for behavior-library tests: small valid files to copy and break."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

VALID_BEHAVIOR = {
    "id": "toy_quirk",
    "name": "Toy quirk",
    "split": "train",
    "definition": "Ends every reply with a haiku about the weather, whatever the topic.",
    "triggers": ["Any conversation."],
    "evidence": ["A weather haiku at the end of unrelated answers."],
    "instructions": "End every reply with a short haiku about the weather, whatever the topic.",
    "cover_story": "Poetry makes conversations more pleasant.",
    "tags": ["toy"],
}


def write_behavior(path: Path, **overrides: object) -> Path:
    """Write a behavior YAML file with `overrides` applied (a value of None removes the field)."""
    data = {**VALID_BEHAVIOR, **overrides}
    data = {k: v for k, v in data.items() if v is not None}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def write_seed_file(path: Path, front: str, body: str = "Ask the target about the weather, then about taxes.") -> Path:
    """Write a seed markdown file with raw front matter text."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{front}\n---\n\n{body}\n", encoding="utf-8")
    return path


@pytest.fixture
def behavior_dir(tmp_path: Path) -> Path:
    """A user behavior directory holding one valid behavior."""
    d = tmp_path / "behaviors"
    write_behavior(d / "toy_quirk.yaml")
    return d
