# The two set-up commands of the README: `make run` (main job, offline default) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
export OMP_NUM_THREADS ?= 1
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export TRL_EXPERIMENTAL_SILENCE ?= 1

.PHONY: install run test bench clean

$(VENV)/.installed: pyproject.toml Makefile
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev,offline]"
	touch $@

install: $(VENV)/.installed

run: install
	$(VENV)/bin/auditrl train --config configs/auditworld.yaml

# two workers (pytest-xdist), one torch thread each: the suite took 17.5 min on one core of a two-core machine
test: install
	$(PY) -m pytest -q -n 2

# every benchmark with a goal, run one after another, summed up in one table (figure, goal, anchor, CPU)
bench: install
	$(PY) benchmarks/summary.py

clean:
	rm -rf $(VENV) runs
