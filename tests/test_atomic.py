"""Atomic writes: whole files only, with ordinary permissions."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from auditrl.atomic import atomic_write_text


def test_atomic_write_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "out" / "results.json"
    atomic_write_text(path, "first")
    atomic_write_text(path, "second")
    assert path.read_text() == "second"
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]


def test_atomic_write_uses_the_umask_not_owner_only(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = atomic_write_text(tmp_path / "report.html", "<html></html>")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
