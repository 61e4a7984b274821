"""Real file-system faults for the tests: a folder that is read-only, and a disk that fills up.

Root ignores permission bits, so for root a read-only folder is a read-only bind mount and a full disk a
small tmpfs; for other users the folder is made read-only with its permissions. Where neither is possible
(root without mount rights), the test is skipped with the reason, and the injected-fault tests still run.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


def _umount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """`folder` and everything in it read-only for this process while the block runs."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in [folder, *folder.rglob("*")]}
        for p in modes:
            p.chmod(modes[p] & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        try:
            yield
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    if not (_mount("--bind", str(folder), str(folder)) and _mount("-o", "remount,ro,bind", str(folder))):
        _umount(folder)
        pytest.skip("root without mount rights: no way to make a folder read-only for root here")
    try:
        yield
    finally:
        _umount(folder)


@contextmanager
def small_disk(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (e.g. "64k") mounted at `folder` while the block runs (root with mount rights)."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or not _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)):
        pytest.skip("a small file system needs root with mount rights; the injected ENOSPC test covers the rest")
    try:
        yield folder
    finally:
        _umount(folder)
