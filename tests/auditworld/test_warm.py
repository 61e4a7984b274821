"""The install's numba step: it runs every AuditWorld kernel that Python code calls, so each is compiled (or loaded)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import auditrl.auditworld

PACKAGE = Path(auditrl.auditworld.__file__).parent


def _called_kernels() -> set[str]:
    """The kernels AuditWorld's modules call as `kernels.<name>` (the others are only called by kernels)."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        if path.name != "kernels.py":
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "kernels":
                    names.add(node.attr)
    return names


def test_compile_kernels_runs_every_kernel_python_calls_in_a_fresh_process(tmp_path: Path) -> None:
    code = "import json; from auditrl.auditworld.warm import compile_kernels; print(json.dumps(compile_kernels()))"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    called = _called_kernels()
    assert {"step", "observe", "pick_heads", "read_counts", "record_keys"} <= called  # the scan finds the calls
    assert called <= set(json.loads(done.stdout.splitlines()[-1]))
