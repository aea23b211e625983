# redrive: every target bootstraps .venv itself.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_WORKERS ?= 2

.PHONY: run test lint bench format clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## run: start the server on SQLite (./redrive.db) at http://127.0.0.1:8080
run: $(STAMP)
	$(BIN)/redrive serve

## lint: ruff (lint + format check), mypy strict, import-linter layer contracts
lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

# The browser tests drive Debian's Chromium (never a downloaded one).
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	apt-get install -y --no-install-recommends chromium || (apt-get update && apt-get install -y --no-install-recommends chromium)

## test: lint, then the whole suite (unit, behaviour on both stores, OJS conformance, integration, browser)
test: lint $(CHROMIUM)
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadgroup

## bench: performance figures (printed as a table, saved under bench/results/)
bench: $(STAMP)
	$(BIN)/python -m bench

format: $(STAMP)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
