"""The declared keys of `Transcript.scores`/`metadata`: stored transcripts load and write back byte for byte,
values are read and written through their declarations, and no key is declared twice."""

from __future__ import annotations

import ast
import copy
import pickle
from pathlib import Path

import pytest

from auditrl.scaffold.store import read_transcripts, write_transcripts
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import (
    AUDIT_QUALITY,
    JUDGE_ERRORS,
    KEYS,
    ORDER_DISAGREEMENT,
    REALISM_OPENING,
    REWARD,
    ROLLOUT,
    STEP,
    TARGET_PREFILL,
    Key,
    KeyValueError,
)

STORED = Path(__file__).parent / "data" / "stored_transcript.jsonl"
"""A judged, trained-on audit written before the keys were declared, with a plugin judge's key of its own."""
SRC = Path(__file__).resolve().parents[2] / "src" / "auditrl"


def _stored() -> Transcript:
    return Transcript.model_validate_json(STORED.read_text())


def test_a_stored_transcript_loads_and_writes_back_byte_for_byte(tmp_path: Path) -> None:
    line = STORED.read_text().rstrip("\n")
    assert _stored().model_dump_json() == line
    out = tmp_path / "transcripts.jsonl"
    write_transcripts(out, read_transcripts(STORED))
    assert out.read_bytes() == STORED.read_bytes()


def test_declared_keys_read_typed_values_and_leave_other_keys_alone() -> None:
    t = _stored()
    assert REWARD.get(t) == 0.75 and ROLLOUT.get(t) == 5 and STEP.get(t) == 3
    assert ORDER_DISAGREEMENT.get(t) == 1.0 and TARGET_PREFILL.get(t) is not None
    quality = AUDIT_QUALITY.get(t)
    assert quality and all(isinstance(v, float) for v in quality.values())
    assert REALISM_OPENING.get(t) == {"id": "o-1", "provenance": "packaged"}
    assert set(JUDGE_ERRORS.get(t) or {}) == {"realism"}
    assert t.scores["my_plugin_judge"] == {"verdict": "odd", "weights": [1, 2.5]}  # a plugin's own key is kept as is
    assert "my_plugin_judge" not in {str(k) for k in KEYS.values()}


def test_a_wrong_value_is_refused_on_write_and_named_on_read() -> None:
    t = _stored()
    with pytest.raises(KeyValueError, match="reward"):
        REWARD.set(t, "high")  # type: ignore[arg-type]
    assert t.scores["reward"] == 0.75  # nothing was written
    t.metadata["rollout"] = "first"
    with pytest.raises(KeyValueError, match=rf"transcript {t.id}: metadata\['rollout'\] = 'first'"):
        ROLLOUT.get(t)
    t.scores["audit_quality"] = {"depth": "deep"}
    with pytest.raises(KeyValueError, match=r"is not dict\[str, float\]"):
        AUDIT_QUALITY.get(t)
    REWARD.set(t, None)  # an unscored rollout
    assert REWARD.get(t) is None and "reward" in t.scores


def test_a_written_value_is_stored_as_given_so_files_keep_their_bytes() -> None:
    t = _stored()
    REWARD.set(t, 1)
    assert t.scores["reward"] == 1 and type(t.scores["reward"]) is int  # not rewritten as 1.0
    assert '"reward":1,' in t.model_dump_json()


def test_copies_and_pickles_hold_plain_string_keys() -> None:
    """A transcript crosses processes (accelerate's gather_object pickles it) and is deep-copied by pydantic."""
    t = _stored()
    REWARD.set(t, 0.5)
    t.scores[ORDER_DISAGREEMENT] = 0.0
    for other in (copy.deepcopy(t), pickle.loads(pickle.dumps(t)), t.model_copy(deep=True)):
        assert all(type(k) is str for k in (*other.scores, *other.metadata))
        assert other.model_dump_json() == t.model_dump_json()


def test_every_key_is_declared_once_with_a_type_and_a_meaning() -> None:
    names = [(k.where, str(k)) for k in KEYS.values()]
    assert len(names) == len(set(names))
    assert all(isinstance(k, Key) and k.meaning and k.type is not None for k in KEYS.values())
    with pytest.raises(ValueError, match="declared twice"):
        from auditrl.scaffold.transcript_keys import score

        score("reward", float, "again")


def _spelled_out(tree: ast.AST, declared: set[str]) -> list[str]:
    """Where a module spells a declared key itself: `t.scores["reward"]`, `t.metadata.get("step")`, `"step" in
    t.metadata`, `metadata={"world": ...}`, or a constant `SOMETHING_KEY = "reward"` of its own."""

    def held(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr in ("scores", "metadata")

    def key(node: ast.AST | None) -> str | None:
        return node.value if isinstance(node, ast.Constant) and node.value in declared else None

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and held(node.value):
            found.append(key(node.slice))
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and held(node.func.value) and node.args
        ):
            found.append(key(node.args[0]))
        elif isinstance(node, ast.Compare) and held(node.comparators[0]):
            found.append(key(node.left))
        elif isinstance(node, ast.keyword) and node.arg in ("scores", "metadata") and isinstance(node.value, ast.Dict):
            found.extend(key(k) for k in node.value.keys)
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id.endswith("_KEY") for t in node.targets
        ):
            found.append(key(node.value))
    return [f for f in found if f is not None]


def test_no_module_spells_a_declared_key_itself() -> None:
    """Every read and write of a declared key goes through its declaration, so a rename is one edit."""
    declared = {str(k) for k in KEYS.values()}
    found = {
        str(path.relative_to(SRC)): keys
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "transcript_keys.py" and (keys := _spelled_out(ast.parse(path.read_text()), declared))
    }
    assert found == {}
