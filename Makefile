# Developer entry points. `make demo` and `make test` are all a newcomer needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp
# Extra flags for the demo, e.g. `make demo DEMO_ARGS="--size 512 --json"`.
DEMO_ARGS ?=

.PHONY: venv demo test lint

venv: $(STAMP)

# Re-install only when pyproject.toml changes (or the venv is new); otherwise a no-op.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: venv
	$(BIN)/tensortune demo $(DEMO_ARGS)

test: venv
	$(BIN)/python -m pytest -q
	$(BIN)/ruff check .

lint: venv
	$(BIN)/ruff check .
