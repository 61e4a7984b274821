"""Write the bytecode cache of every module the named packages import, their dependencies' included.

The Makefile installs with `pip install --no-compile`: pip otherwise byte-compiles every file of every wheel it
installs (about a minute on two cores, most of it for modules auditrl never imports, such as the hundreds of model
families transformers ships). Importing each module of the named packages here compiles and caches just the
modules they use, so every later process reads them, even where PYTHONDONTWRITEBYTECODE is set; a module no
package imports is compiled when something first imports it, as Python always does.

    python scripts/compile_imports.py auditrl
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="+", help="importable package names")
    args = parser.parse_args()
    start = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # libraries' import-time deprecation notes are not this step's business
        imported, failed = compile_imports(args.packages)
    seconds = time.process_time() - start
    print(f"compiled the imports of {imported} modules in {seconds:.0f} CPU-s", file=sys.stderr)
    for line in failed:
        print(f"  not imported: {line}", file=sys.stderr)


if __name__ == "__main__":
    main()
