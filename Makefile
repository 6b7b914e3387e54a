# One target per habit. `make tune` and `make test` are the README's two commands.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: tune test lint typecheck unit gpu-test bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	if command -v nvidia-smi >/dev/null 2>&1; then $(BIN)/python -m pip install -q -e '.[gpu]'; fi
	touch $(STAMP)

## the main job: an embedded tuning campaign (GPU if pycuda finds one, else the replay dataset)
tune: $(STAMP)
	$(BIN)/tuneforge tune $(ARGS)

## the whole test suite: lint, types, import contracts, tests (GPU tests skip without a GPU)
test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy .

unit: $(STAMP)
	$(BIN)/pytest -q $(PYTEST_ARGS)

## on a GPU host: the gpu-marked tests only
gpu-test: $(STAMP)
	$(BIN)/pytest -q -m gpu $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
