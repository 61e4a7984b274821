"""Fixtures for the reliability tests: a real headless browser."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


def _install_chromium() -> None:
    """Debian's chromium package, installed with apt-get (through sudo when not root)."""
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*sudo, "apt-get", "update", "-q"], check=True, env=env, capture_output=True)
    subprocess.run(
        [*sudo, "apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"],
        check=True,
        env=env,
        capture_output=True,
    )


@pytest.fixture(scope="session")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The chromium executable, installed first when absent; under pytest-xdist one worker installs it while the
    others wait on a lock in the run's shared temporary folder (two apt-gets at once fail on dpkg's own lock)."""
    with FileLock(tmp_path_factory.getbasetemp().parent / "chromium.lock"):
        found = shutil.which("chromium")
        if found is None:
            _install_chromium()
            found = shutil.which("chromium")
    assert found is not None, "apt-get install chromium did not put chromium on PATH"
    return found


@pytest.fixture()
def render_dom(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], str]:
    """Open an HTML file in headless chromium, let its scripts and timers run, and return the DOM."""

    def render(page: Path) -> str:
        profile = tmp_path_factory.mktemp("chromium-profile")
        done = subprocess.run(
            [
                chromium,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                "--virtual-time-budget=3000",
                "--dump-dom",
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    return render
