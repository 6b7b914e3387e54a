# One target per habit. `make tune` and `make test` are the README's two commands.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: tune test test-full lint typecheck unit workers pool solo fuzz bytecode browser gpu-test bench docs clean

## pip compiles nothing; site-packages is compiled afterwards on every core (a few packages
## ship files for a newer Python, e.g. torch's py312_intrinsics.py, so compileall's status is
## not the install's)
$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q --no-compile -e '.[dev]'
	if command -v nvidia-smi >/dev/null 2>&1; then $(BIN)/python -m pip install -q --no-compile -e '.[gpu]'; fi
	$(BIN)/python -m compileall -q -j0 $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))') > /dev/null || true
	touch $(STAMP)

## the main job: an embedded tuning campaign (GPU if pycuda finds one, else the replay dataset)
tune: $(STAMP)
	$(BIN)/tuneforge tune $(ARGS)

## the whole test suite: lint, types, import contracts, tests (GPU tests skip without a GPU).
## The nvcc sweeps compile a stratified sample of their points (tests/sampling.py). mypy runs
## beside the API fuzz file (about a core each; each one's output whole when it ends) and the
## browser's install (mostly waiting on apt), then the other tests on their workers
test: lint
	$(MAKE) --no-print-directory -j3 --output-sync=target typecheck fuzz browser
	$(MAKE) --no-print-directory workers

## the same with every point of the nvcc sweeps compiled (pytest --full): for a scheduled run
test-full:
	$(MAKE) test PYTEST_ARGS="--full $(PYTEST_ARGS)"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy .

## a worker a core (four at most), a file's tests on one worker (its module fixtures built
## once), the longest files first (tests/conftest.py LONGEST_FIRST, kept in that order by
## --no-loadscope-reorder); XDIST= runs it serially. Beside the workers, in a pytest of its
## own, the fault-injection file (SOLO): minutes of waiting on the service's recovery for a
## few seconds of CPU, which on a worker left a core idle while it waited. The API fuzz test
## runs on its own, never with workers: its cases share one node id (tests/conftest.py)
XDIST ?= -n auto --maxprocesses 4 --dist loadfile --no-loadscope-reorder
FUZZ := tests/service/test_fuzz_api.py
SOLO := tests/service/test_fault_injection.py
unit: workers fuzz

workers: $(STAMP) browser bytecode
	$(MAKE) --no-print-directory -j2 --output-sync=target pool solo

pool: $(STAMP) browser bytecode
	$(BIN)/pytest -q $(XDIST) --ignore=$(FUZZ) --ignore=$(SOLO) $(PYTEST_ARGS)

solo: $(STAMP) bytecode
	$(BIN)/pytest -q $(SOLO) $(PYTEST_ARGS)

fuzz: $(STAMP) bytecode
	$(BIN)/pytest -q $(FUZZ) $(PYTEST_ARGS)

## the project's own modules compiled once: the editable install leaves them as sources, and
## where PYTHONDONTWRITEBYTECODE is set every tuneforge child, API and worker a test starts
## compiled them again (importing cli.main 0.7 s -> 0.5 s)
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q -j0 agent api cli core kernels worker bench > /dev/null

## Debian's Chromium for the dashboard tests (driven headless by Playwright): installed with
## apt-get where it can be (root), else the command to run; the tests fail without it, as in CI
browser:
	@command -v $${TUNEFORGE_CHROMIUM:-chromium} >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian's chromium for the dashboard tests (apt-get)"; \
	    log=$${TMPDIR:-/tmp}/tuneforge-chromium-install.log; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
	      >$$log 2>&1 || { echo "apt-get install chromium failed: $$log" >&2; exit 1; }; \
	  else \
	    echo "the dashboard tests need Debian's chromium: sudo apt-get install -y chromium" \
	         "(or TUNEFORGE_CHROMIUM=/path/to/chromium)" >&2; \
	  fi; }

## on a GPU host: the gpu-marked tests only
gpu-test: $(STAMP)
	$(BIN)/pytest -q -m gpu $(PYTEST_ARGS)

## docs/reference/ (CLI, API, feedback record, settings) written again from the code
docs: $(STAMP)
	$(BIN)/python -m bench.reference_docs

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
