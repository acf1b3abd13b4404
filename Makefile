# `make test` and `make run` bootstrap everything they need into .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.bolide-installed

.PHONY: test run lint typecheck contracts unit bench clean

$(STAMP): pyproject.toml
	command -v java >/dev/null || { apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless; }
	test -x /usr/bin/chromium || { apt-get update -qq && apt-get install -y -qq chromium; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy

contracts: $(STAMP)
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest

test: lint typecheck contracts unit

run: $(STAMP)
	$(BIN)/bolide standalone

bench: $(STAMP)
	$(BIN)/python bench/codec.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
