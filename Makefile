# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates .venv when missing, installs the project with its locked
# dependencies (constraints.txt), checks for Java >= 17, then runs.

PYTHON ?= $(shell for p in python3.13 python3.12 python3.11 python3; do \
            command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && echo $$p && break; done)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo test lint install java lock clean

demo: install java
	$(BIN)/warehouse demo

test: install java
	@scripts/ensure-test-tools.sh
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .

install: $(STAMP)

$(BIN)/python:
	@test -n "$(PYTHON)" || { echo "Python >= 3.11 is required (python3.11 or newer on PATH)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,bundle]'
	@touch $@

java:
	@scripts/ensure-java.sh

# Re-pin constraints.txt to what is installed in .venv now.
lock: install
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^spark-warehouse' > constraints.txt

clean:
	rm -rf $(VENV) .warehouse .pytest_cache .ruff_cache
