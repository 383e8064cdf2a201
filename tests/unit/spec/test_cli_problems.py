"""What a user sees when `warehouse plan` meets a project with problems: exit 2, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.unit.spec.conftest import PROJECTS, REPO_ROOT


def plan(project: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m warehouse --project DIR plan`, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "warehouse", "--project", str(PROJECTS / project), "plan"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        timeout=120,
    )


def test_plan_reports_every_expectation_problem_with_file_and_field(tmp_path: Path) -> None:
    result = plan("expectation_problems", tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    for where in (
        "layers/ods/events.yml: expectations[1].expect_column_values_to_not_be_null: "
        "expectation `expect_column_values_to_not_be_null(id)` is declared twice",
        "layers/ods/events.yml: expectations[3].expect_column_values_to_not_be_null: "
        "expectation `positive` is declared twice",
        "layers/ods/events.yml: expectations[4].expect_column_values_to_not_be_null.column: "
        "Table `ods_events`: expectation column `amout` is not a column of the source",
        "layers/ods/clicks.yml: expectations[0].on_violation: `explode` is not allowed",
    ):
        assert any(where in line for line in lines), f"{where!r} not in:\n{result.stderr}"
    assert result.stdout == ""


def test_plan_reports_a_cdc_table_without_schema(tmp_path: Path) -> None:
    result = plan("cdc_without_schema", tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert (
        "layers/dwd/users.yml: source.kafka.schema: Table `dim_users`: format "
        "`debezium-json` needs the columns of the row" in result.stderr
    )
    assert "layers/dwd/prices.yml: source.kafka.schema: Table `dim_prices`" in result.stderr
    # Declared with a schema file, or with the records' own schema: both load.
    assert "dim_products" not in result.stderr
    assert "dim_accounts" not in result.stderr
    assert "dim_stock" not in result.stderr
