# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates .venv when missing, installs the project with its locked
# dependencies (constraints.txt) and its optional C extensions (for which it
# installs a C compiler and Python's headers on Debian as root), checks for Java >= 17,
# resolves the native engines' jars (Spark's Kafka connector, delta-spark) and the
# object-storage jars (hadoop-aws, the AWS SDK bundle) once into
# ~/.cache/spark-warehouse/jars, and the test servers' jars (Apache Kafka, S3Proxy, Kafka
# Connect with Debezium) beside them (later runs find them there and need no network) and
# makes a class archive of Spark for this Java that local sessions start with, then runs.
# The dependencies and the project's own packages are installed with their byte code: a
# Python process that compiles pyspark, pyarrow and pandas from source spends 2 s of CPU
# more on its imports (docs/decisions/0044-install-with-uv.md).

PYTHON ?= $(shell for p in python3.13 python3.12 python3.11 python3; do \
            command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && echo $$p && break; done)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
WHEELS := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/spark-warehouse/wheels
PYTEST_ARGS ?=

.PHONY: demo test lint install java lock clean

demo: install
	$(BIN)/warehouse demo

# The whole suite: four pytest processes side by side (scripts/test-suite.sh says which
# tests each runs, and why). Every test JVM runs C1-only with the serial collector
# (tests/conftest.py), Python workers import the compiled pyspark
# (warehouse/runtime/spark_home.py). PYTEST_ARGS given: one pytest process with exactly
# those arguments.
test: install
	@scripts/ensure-test-tools.sh
ifeq ($(strip $(PYTEST_ARGS)),)
	@scripts/test-suite.sh
else
	$(BIN)/python -m pytest $(PYTEST_ARGS)
endif

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# Where Maven Central cannot be reached the framework still runs, on its Python engines
# (`engines: auto`); the tests of the native engines then fail and say why.
install: $(STAMP) java
	@$(BIN)/python -m compileall -q -j 0 streams warehouse >/dev/null
	@$(BIN)/warehouse jars fetch \
	  || echo "native jars not resolved: sessions will run on the Python engines" >&2
	@scripts/apache-kafka.sh || echo "Apache Kafka not cached (see above): the oracle tests in tests/integration/oracle will fail until scripts/apache-kafka.sh succeeds" >&2
	@scripts/s3proxy.sh || echo "S3Proxy not cached (see above): the object-storage tests will fail until scripts/s3proxy.sh succeeds" >&2
	@scripts/kafka-connect.sh || echo "Kafka Connect and Debezium not cached (see above): the Connect tests (tests/integration/connect, tests/integration/cdc/test_debezium_postgres.py) will fail, and warehouse mirror refuse to start, until scripts/kafka-connect.sh succeeds" >&2

$(BIN)/python:
	@test -n "$(PYTHON)" || { echo "Python >= 3.11 is required (python3.11 or newer on PATH)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)

# pyspark comes as a source distribution only; uv installs it from a wheel built once into
# the framework's cache (scripts/pyspark-wheel.sh), not from a build of its own at every
# install. `uv cache prune` removes only what nothing refers to, and waits for other uv
# processes.
$(STAMP): $(BIN)/python pyproject.toml constraints.txt
	@scripts/ensure-compiler.sh $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt uv
	@scripts/pyspark-wheel.sh $(BIN)/python $(WHEELS)
	$(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python -c constraints.txt \
	  --find-links $(WHEELS) -e '.[dev,bundle,ui,connect]'
	@$(BIN)/uv cache prune -q
	@touch $@

java:
	@scripts/ensure-java.sh

# Re-pin constraints.txt to what is installed in .venv now.
lock: install
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^spark-warehouse' > constraints.txt

clean:
	rm -rf $(VENV) .warehouse .pytest_cache .ruff_cache
