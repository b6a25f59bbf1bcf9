# Developer entry points. `make demo` and `make test` are all a newcomer needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp
# The demo: a real tuning run (about a minute) of a 512^3 float32 matmul on this CPU, stored
# in the embedded SQLite database; extra flags e.g. `make demo DEMO_ARGS="--json"`.
DEMO_WORKLOAD := --op matmul -p M=512 -p N=512 -p K=512 --trials 64
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
	$(BIN)/tensortune tune $(DEMO_WORKLOAD) $(DEMO_ARGS)

test: venv
	$(BIN)/python -m pytest -q
	$(BIN)/ruff check .

lint: venv
	$(BIN)/ruff check .
