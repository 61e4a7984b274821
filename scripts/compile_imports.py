"""Write the bytecode cache of every module the named packages import, their dependencies' included.

The Makefile installs with `pip install --no-compile`: pip otherwise byte-compiles every file of every wheel it
installs (about a minute on two cores, most of it for modules auditrl never imports, such as the hundreds of model
families transformers ships). Importing each module of the named packages here compiles and caches just the
modules they use, so every later process reads them, even where PYTHONDONTWRITEBYTECODE is set; a module no
package imports is compiled when something first imports it, as Python always does.

Importing is one process on one core; `--beside module:function` calls a function in a second process meanwhile, for
another cache that is filled by running code (numba's compiled kernels, `auditrl.auditworld.warm`). Its failure fails
this step, with its own traceback.

    python scripts/compile_imports.py auditrl --beside auditrl.auditworld.warm:compile_kernels
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import subprocess
import sys
import time
import warnings


def compile_imports(packages: list[str]) -> tuple[int, list[str]]:
    """Import every module of `packages` (skipping `__main__` modules, which run a program); returns how many
    imported, and the modules whose imports are missing, with the reason."""
    sys.dont_write_bytecode = False
    imported = 0
    failed: list[str] = []
    for name in packages:
        package = importlib.import_module(name)
        imported += 1
        found = pkgutil.walk_packages(getattr(package, "__path__", []), f"{name}.", onerror=failed.append)
        for module in found:
            if module.name.rsplit(".", 1)[-1] == "__main__":
                continue
            try:
                importlib.import_module(module.name)
                imported += 1
            except ImportError as exc:  # an optional extra (the GPU one) not installed
                failed.append(f"{module.name} ({type(exc).__name__}: {str(exc)[:120]})")
    return imported, failed


def call_beside(target: str) -> subprocess.Popen[bytes]:
    """Start calling `module:function` in a new interpreter (this one's), which writes what it has to say itself."""
    module, sep, function = target.partition(":")
    if not (sep and module and function.isidentifier()):
        raise SystemExit(f"--beside {target!r}: expected module:function")
    code = f"import importlib; importlib.import_module({module!r}).{function}()"
    return subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="+", help="importable package names")
    parser.add_argument(
        "--beside", action="append", default=[], metavar="MODULE:FUNCTION", help="call in another process meanwhile"
    )
    args = parser.parse_args()
    start = time.process_time()
    beside = [(target, call_beside(target)) for target in args.beside]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # libraries' import-time deprecation notes are not this step's business
        imported, failed = compile_imports(args.packages)
    seconds = time.process_time() - start
    print(f"compiled the imports of {imported} modules in {seconds:.0f} CPU-s", file=sys.stderr)
    for line in failed:
        print(f"  not imported: {line}", file=sys.stderr)
    for target, process in beside:
        _, status, usage = os.wait4(process.pid, 0)  # its exit and, unlike Popen.wait, its CPU time
        code = process.returncode = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"{target} failed (exit status {code})")
        print(f"ran {target} beside, in {usage.ru_utime + usage.ru_stime:.0f} CPU-s", file=sys.stderr)


if __name__ == "__main__":
    main()
