"""The install's byte-compiling step: it caches the bytecode of what a package imports, and runs no program."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compile_imports.py"


def _compile_imports() -> Callable[[list[str]], tuple[int, list[str]]]:
    spec = importlib.util.spec_from_file_location("compile_imports", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    compile_imports: Callable[[list[str]], tuple[int, list[str]]] = module.compile_imports
    return compile_imports


def _package(root: Path) -> None:
    """A package with a submodule, a subpackage, a module that imports a missing dependency, and a `__main__`."""
    pkg = root / "toy_pkg_for_compiling"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "used.py").write_text("import toy_dep_for_compiling\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "deep.py").write_text("VALUE = 1\n")
    (pkg / "extra.py").write_text("import not_installed_anywhere_xyz\n")
    (pkg / "__main__.py").write_text("raise SystemExit('a program ran')\n")
    (root / "toy_dep_for_compiling.py").write_text("DEP = 2\n")


def test_every_imported_module_is_cached_even_where_writing_bytecode_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # as PYTHONDONTWRITEBYTECODE sets it
    for name in [m for m in sys.modules if m.startswith(("toy_pkg_for_compiling", "toy_dep_for_compiling"))]:
        monkeypatch.delitem(sys.modules, name)
    imported, failed = _compile_imports()(["toy_pkg_for_compiling"])
    cached = {p.name.split(".")[0] for p in tmp_path.rglob("__pycache__/*.pyc")}
    assert {"__init__", "used", "deep", "toy_dep_for_compiling"} <= cached  # the dependency of a module too
    assert "__main__" not in cached and imported == 4  # the package, used, sub and sub.deep
    assert len(failed) == 1 and "extra" in failed[0] and "not_installed_anywhere_xyz" in failed[0]


def _script_main() -> Callable[[], None]:
    spec = importlib.util.spec_from_file_location("compile_imports", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    main: Callable[[], None] = module.main
    return main


def test_a_function_beside_runs_in_its_own_process_and_its_failure_fails_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    _package(tmp_path)
    (tmp_path / "toy_beside.py").write_text(
        "import os, pathlib\n"
        "def mark():\n    pathlib.Path('marked').write_text(str(os.getpid()))\n"
        "def fail():\n    raise RuntimeError('the warm-up broke')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    for name in [m for m in sys.modules if m.startswith(("toy_pkg_for_compiling", "toy_dep_for_compiling"))]:
        monkeypatch.delitem(sys.modules, name)
    main = _script_main()
    monkeypatch.setattr(sys, "argv", ["compile_imports.py", "toy_pkg_for_compiling", "--beside", "toy_beside:mark"])
    main()
    assert int((tmp_path / "marked").read_text()) != os.getpid()  # another process called it
    assert "ran toy_beside:mark beside, in" in capfd.readouterr().err
    for target, reason in (("toy_beside:fail", "toy_beside:fail failed (exit status 1)"),
                           ("toy_beside", "expected module:function")):  # fmt: skip
        monkeypatch.setattr(sys, "argv", ["compile_imports.py", "toy_pkg_for_compiling", "--beside", target])
        with pytest.raises(SystemExit, match=re.escape(reason)):
            main()
    assert "RuntimeError: the warm-up broke" in capfd.readouterr().err
