"""What a Spark Python worker imports to unpickle a landing task's rules and quarantine
rows (`ArrowChecks`, `ParseErrorRows`): their modules and the landing path, not the
rest of the framework (the project, the compiler, the spec's pydantic models), which
would cost each worker's first task its import. A fresh interpreter unpickles them, as
a worker does."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from warehouse.quality.arrow_quarantine import ParseErrorRows
from warehouse.quality.arrow_rows import arrow_checks
from warehouse.spec.table import Expectation

REPO = Path(__file__).resolve().parents[3]

UNPICKLE = """
import pickle, sys
rules, known = pickle.loads(sys.stdin.buffer.read())
assert rules.size == 2 and known.batch_id == 7
print(" ".join(sorted(sys.modules)))
"""


def test_unpickling_a_tasks_rules_imports_none_of_the_rest_of_the_framework() -> None:
    schema = pa.schema([("id", pa.int64()), ("city", pa.string())])
    rules = arrow_checks(
        [
            Expectation.model_validate(
                {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id"}}
            ),
            Expectation.model_validate(
                {
                    "type": "expect_column_value_lengths_to_be_between",
                    "kwargs": {"column": "city", "min_value": 1},
                    "on_violation": "quarantine",
                }
            ),
        ],
        schema,
    )
    assert rules is not None
    known = ParseErrorRows("s3a://b/q", pa.schema([]), 7, datetime(2026, 12, 4, tzinfo=UTC))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", UNPICKLE],
        input=pickle.dumps((rules, known)),
        capture_output=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    modules = set(done.stdout.decode().split())
    assert {"warehouse.quality.arrow_rows", "warehouse.quality.arrow_quarantine"} <= modules
    ours = sorted(m for m in modules if m.startswith("warehouse"))
    assert ours == [
        "warehouse",
        "warehouse.exports",
        "warehouse.quality",
        "warehouse.quality.arrow_quarantine",
        "warehouse.quality.arrow_rows",
    ]
    assert not {"pydantic", "sqlglot", "yaml"} & modules, sorted(modules)
