# Set-up is part of both entry points: on a fresh machine `make demo` and `make test` do everything.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test test-fast benchmark setup

setup: $(VENV)/.installed

# torch==2.13.0 first: it resolves to the local CPU build; a plain `torch` pulls GBs of CUDA wheels
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev,benchmarks,examples,ray,sagemaker,report]"
	touch $@

# Main job: short comparison of DyHPO, DeepPowerLaw, RandomSearch, ASHA, BOHB on the shipped data
demo: setup
	$(BIN)/python benchmarks/demo.py

# Tests: unit tests + end-to-end Tuner runs (simulator, LocalBackend, Ray)
test: setup
	$(BIN)/python -m pytest -q

# Unit tests only, without the tests marked slow (about a minute)
test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow"

# Benchmark grid; long. DATA: serialized blackbox folders or repository names; the default is
# the data the repo ships (benchmarks/RESULTS.md gives the command of the development grid)
DATA ?= benchmarks/data/lcbench benchmarks/data/taskset
benchmark: setup
	$(BIN)/python benchmarks/run_benchmarks.py --data $(DATA) \
		--methods DyHPO DeepPowerLaw RandomSearch ASHA BOHB --seeds 0 1 2 3 4 --n-jobs 2 \
		--results-dir results/benchmark --report-dir results/benchmark/report
