# Set-up is part of both entry points: on a fresh machine `make demo` and `make test` do everything.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test test-fast lint benchmark benchmark-wallclock setup

setup: $(VENV)/.installed

# torch==2.13.0 first: it resolves to the local CPU build; a plain `torch` pulls GBs of CUDA wheels
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev,benchmarks,examples,ray,sagemaker,report]"
	touch $@

# Main job: short comparison of DyHPO, DeepPowerLaw, RandomSearch, ASHA, BOHB on the shipped data
# (4 tasks, seed 0, 500 epochs per run, 2 processes; finished runs in results/demo are reused)
demo: setup
	$(BIN)/python benchmarks/demo.py

# Tests: unit tests + end-to-end Tuner runs (simulator, LocalBackend, Ray, SageMaker on moto), in
# 3 processes (pytest-xdist): most end-to-end tests wait on real processes and the Tuner's sleeps
PYTEST_WORKERS ?= 3
test: setup
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS)

# Without the tests marked slow
test-fast: setup
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) -m "not slow"

# Lint and type check (configured in pyproject.toml): ruff over the repository, mypy over the package
lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy syne_dyhpo

# The unit tests with the oldest versions pyproject.toml's dependencies allow and with the newest
# (two fresh virtual environments in a temporary folder; downloads torch twice)
.PHONY: check-dependency-range
check-dependency-range:
	tools/check_dependency_range.sh

# The development grid (hours on 2 cores; finished runs are reused), then benchmarks/RESULTS.md
# and its figures from its runs. DEV: the folder holding the development data (lcbench,
# lcbench-extra, taskset; not shipped): make benchmark DEV=FOLDER
RESULTS_DIR ?= results/dev
RESEEDED_DIR ?= results/reseeded
MORE_SEEDS_DIR ?= results/more-seeds
WALLCLOCK_DIR ?= results/wallclock
benchmark: setup
	@test -n "$(DEV)" || { echo "make benchmark DEV=FOLDER: the folder holding lcbench, lcbench-extra and taskset"; exit 2; }
	$(BIN)/python benchmarks/run_benchmarks.py --data $(DEV)/lcbench $(DEV)/lcbench-extra $(DEV)/taskset \
		--methods ASHA BOHB RandomSearch DyHPO DeepPowerLaw DyHPO-no-completion DeepPowerLaw-no-completion \
		DyHPO-no-depth-gate DeepPowerLaw-no-depth-gate DyHPO-papers DeepPowerLaw-papers \
		--seeds 0 1 2 3 4 --n-workers 1 4 --n-jobs 2 --results-dir $(RESULTS_DIR)
	$(BIN)/python benchmarks/run_benchmarks.py --data $(DEV)/lcbench $(DEV)/lcbench-extra $(DEV)/taskset \
		--methods ASHA --seeds 5 6 7 8 9 --n-workers 1 4 --n-jobs 2 --results-dir $(RESEEDED_DIR)
	tasks="$$($(BIN)/python -m benchmarks.results $(RESULTS_DIR) --list-tasks-over)"; test -z "$$tasks" || \
	$(BIN)/python benchmarks/run_benchmarks.py --data $(DEV)/lcbench $(DEV)/lcbench-extra $(DEV)/taskset \
		--tasks $$tasks --methods ASHA BOHB DyHPO DeepPowerLaw --seeds 5 6 7 8 9 --n-workers 1 4 --n-jobs 2 \
		--results-dir $(MORE_SEEDS_DIR)
	$(BIN)/python -m benchmarks.results $(RESULTS_DIR) --out benchmarks/RESULTS.md --figures benchmarks/figures \
		--reseeded $(RESEEDED_DIR) $$(test -d $(MORE_SEEDS_DIR) && echo --more-seeds $(MORE_SEEDS_DIR)) \
		$$(test -d $(WALLCLOCK_DIR) && echo --wallclock $(WALLCLOCK_DIR))

# The wall-clock protocol (benchmarks/wallclock.py): the budget is simulated time and every job start
# or resume costs 0, 1 and 10 median epoch times, on the development tasks (hours on 2 cores;
# finished runs are reused; WALLCLOCK_SEEDS, _WORKERS, _DELAYS, _METHODS run a part of the grid);
# then seeds 5-9 at a delay of 0 on the tasks over issue 50's target there (--list-tasks-over);
# writes $(WALLCLOCK_DIR)/wallclock.md and the wall-clock section of benchmarks/RESULTS.md (the
# whole file when the epoch grid's runs are there too). DEV as for `make benchmark`
WALLCLOCK_MORE_SEEDS_DIR ?= results/wallclock-more-seeds
WALLCLOCK_SEEDS ?= 0 1 2 3 4
WALLCLOCK_WORKERS ?= 1 4
WALLCLOCK_DELAYS ?= 0 1 10
WALLCLOCK_METHODS ?= ASHA BOHB DyHPO DeepPowerLaw DyHPO-costs DeepPowerLaw-costs
benchmark-wallclock: setup
	@test -n "$(DEV)" || { echo "make benchmark-wallclock DEV=FOLDER: the folder holding lcbench, lcbench-extra, taskset and taskset-extra"; exit 2; }
	$(BIN)/python benchmarks/run_benchmarks.py --protocol wallclock --start-delay $(WALLCLOCK_DELAYS) \
		--data $(DEV)/lcbench $(DEV)/lcbench-extra $(DEV)/taskset $(DEV)/taskset-extra \
		--methods $(WALLCLOCK_METHODS) --seeds $(WALLCLOCK_SEEDS) --n-workers $(WALLCLOCK_WORKERS) --n-jobs 2 \
		--results-dir $(WALLCLOCK_DIR)
	tasks="$$($(BIN)/python -m benchmarks.results --wallclock $(WALLCLOCK_DIR) --list-tasks-over --start-delay 0)"; \
	test -z "$$tasks" || $(BIN)/python benchmarks/run_benchmarks.py --protocol wallclock --start-delay 0 \
		--data $(DEV)/lcbench $(DEV)/lcbench-extra $(DEV)/taskset $(DEV)/taskset-extra --tasks $$tasks \
		--methods $(WALLCLOCK_METHODS) --seeds 5 6 7 8 9 --n-workers $(WALLCLOCK_WORKERS) --n-jobs 2 \
		--results-dir $(WALLCLOCK_MORE_SEEDS_DIR)
	more="$$(test -d $(WALLCLOCK_MORE_SEEDS_DIR) && echo --wallclock-more-seeds $(WALLCLOCK_MORE_SEEDS_DIR))"; \
	if test -d $(RESULTS_DIR); then $(BIN)/python -m benchmarks.results $(RESULTS_DIR) --out benchmarks/RESULTS.md \
		--figures benchmarks/figures --reseeded $(RESEEDED_DIR) \
		$$(test -d $(MORE_SEEDS_DIR) && echo --more-seeds $(MORE_SEEDS_DIR)) --wallclock $(WALLCLOCK_DIR) $$more; \
	else $(BIN)/python -m benchmarks.results --out benchmarks/RESULTS.md --wallclock $(WALLCLOCK_DIR) $$more; fi
