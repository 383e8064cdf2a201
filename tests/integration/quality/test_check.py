"""`warehouse check` over real Delta tables: results, reports, exit codes, increments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from warehouse.project import Project
from warehouse.quality.check import run_checks

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

ORDERS_YML = """\
table: ods_orders
source: {kafka: {topic: orders, format: json, schema: orders}}
expectations:
  - expect_column_values_to_not_be_null: {column: order_id}
    on_violation: quarantine
  - expect_column_values_to_be_unique: {column: order_id}
  - expect_column_values_to_be_between: {column: amount, min_value: 0, max_value: 1000}
  - expect_table_row_count_to_be_between: {min_value: 1}
  - expect_column_values_to_be_fresh: {column: event_time, max_age: 1 hour}
  - expect_column_values_to_be_of_type: {column: amount, type_: int}
  - expect_column_max_to_be_between: {column: event_time, min_value: "2026-01-01"}
"""
USERS_YML = """\
table: ods_users
source: {kafka: {topic: users, format: json, schema: users}}
expectations:
  - expect_compound_columns_to_be_unique: {column_list: [user_id, city]}
  - expect_column_values_to_not_be_null: {column: user_id}
"""
DWD_YML = """\
table: dwd_orders
source: {table: ods_orders}
expectations:
  - expect_column_values_to_not_be_null: {column: order_id}
"""


@pytest.fixture
def project(tmp_path: Path) -> Project:
    root = tmp_path / "proj"
    for d in ("conf", "schemas", "layers/ods", "layers/dwd"):
        (root / d).mkdir(parents=True)
    (root / "conf" / "local.yml").write_text("warehouse_root: wh\n")
    (root / "schemas" / "orders.ddl").write_text(
        "order_id string, amount int, event_time timestamp\n"
    )
    (root / "schemas" / "users.ddl").write_text("user_id string, city string\n")
    (root / "layers" / "ods" / "orders.yml").write_text(ORDERS_YML)
    (root / "layers" / "ods" / "users.yml").write_text(USERS_YML)
    (root / "layers" / "dwd" / "orders.yml").write_text(DWD_YML)
    return Project.load(root)


def orders(ids: list[str | None], amounts: list[int], *, age: timedelta) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "order_id": pa.array(ids, pa.string()),
            "amount": pa.array(amounts, pa.int32()),
            "event_time": pa.array([NOW - age] * n, pa.timestamp("us", tz="UTC")),
            "_topic": pa.array(["orders"] * n, pa.string()),
            "_offset": pa.array(range(n), pa.int64()),
        }
    )


def write(project: Project, table: str, data: pa.Table, mode: str = "error") -> None:
    # The warehouse's sink creates every table with the change data feed on.
    write_deltalake(
        str(project.table_path(table)), data, mode=mode,
        configuration={"delta.enableChangeDataFeed": "true"} if mode == "error" else None,
    )  # fmt: skip


def by_id(result: dict, table: str) -> dict[str, dict]:
    return {e["expectation"]: e for e in result["tables"][table]["expectations"]}


def test_a_passing_table_exits_0_and_reports_every_expectation(project, tmp_path):
    write(project, "ods_orders", orders(["a", "b", "c"], [1, 2, 999], age=timedelta(minutes=5)))
    report = run_checks(project, table="ods_orders", report_dir=tmp_path / "r", now=NOW)
    assert (report.success, report.exit_code) == (True, 0)
    result = json.loads((tmp_path / "r" / "results.json").read_text())
    assert result["success"] is True
    assert result["statistics"] == {
        "tables": 1, "tables_failed": 0, "expectations": 7, "expectations_failed": 0,
    }  # fmt: skip
    t = result["tables"]["ods_orders"]
    assert (t["status"], t["rows"], t["delta_version"]) == ("passed", 3, 0)
    exps = by_id(result, "ods_orders")
    assert list(exps) == [
        "expect_column_values_to_not_be_null(order_id)",
        "expect_column_values_to_be_unique(order_id)",
        "expect_column_values_to_be_between(amount)",
        "expect_table_row_count_to_be_between()",
        "expect_column_values_to_be_fresh(event_time)",
        "expect_column_values_to_be_of_type(amount)",
        "expect_column_max_to_be_between(event_time)",
    ]
    assert all(e["success"] for e in exps.values())
    assert exps["expect_table_row_count_to_be_between()"]["observed_value"] == 3
    assert exps["expect_column_values_to_be_unique(order_id)"]["unexpected_count"] == 0
    assert exps["expect_column_values_to_be_unique(order_id)"]["engine"] == "great_expectations"
    fresh = exps["expect_column_values_to_be_fresh(event_time)"]
    assert fresh["engine"] == "warehouse"
    assert fresh["observed_value"]["age_seconds"] == 300.0
    assert exps["expect_column_values_to_be_of_type(amount)"]["observed_value"] == "int"
    newest = exps["expect_column_max_to_be_between(event_time)"]
    assert newest["observed_value"] == (NOW - timedelta(minutes=5)).isoformat()
    index = tmp_path / "r" / "data_docs" / "index.html"
    assert index.exists() and "ods_orders" in index.read_text()
    assert result["data_docs"] == str(index)


def test_a_failing_table_exits_1_with_unexpected_counts_and_values(project, tmp_path):
    write(
        project, "ods_orders",
        orders(["a", "b", "b", None], [5, 6, -1, 7], age=timedelta(hours=3)),
    )  # fmt: skip
    write(
        project,
        "ods_users",
        pa.table({"user_id": ["u1", "u1", "u2"], "city": ["Oslo", "Oslo", "Oslo"]}),
    )
    report = run_checks(project, layer="ods", report_dir=tmp_path / "r", now=NOW)
    assert report.exit_code == 1
    result = json.loads(report.results_path.read_text())
    assert result["statistics"]["expectations_failed"] == 5
    assert result["tables"]["ods_orders"]["status"] == "failed"
    exps = by_id(result, "ods_orders")
    unique = exps["expect_column_values_to_be_unique(order_id)"]
    assert (unique["success"], unique["unexpected_count"], unique["unexpected_values"]) == (
        False, 2, ["b", "b"],
    )  # fmt: skip
    not_null = exps["expect_column_values_to_not_be_null(order_id)"]
    assert (not_null["success"], not_null["unexpected_count"]) == (False, 1)
    between = exps["expect_column_values_to_be_between(amount)"]
    assert (between["success"], between["unexpected_values"]) == (False, [-1])
    fresh = exps["expect_column_values_to_be_fresh(event_time)"]
    assert fresh["success"] is False and fresh["observed_value"]["age_seconds"] == 10800.0
    assert exps["expect_table_row_count_to_be_between()"]["success"] is True
    users = by_id(result, "ods_users")
    assert users["expect_compound_columns_to_be_unique(user_id, city)"]["unexpected_count"] == 2
    assert users["expect_column_values_to_not_be_null(user_id)"]["success"] is True
    assert "dwd_orders" not in result["tables"]  # --layer ods
    text = report.summary_text()
    assert "ods_orders  expect_column_values_to_be_unique(order_id)" in text
    assert "FAIL" in text and text.splitlines()[-1].startswith("5 failed; report: ")
    assert (tmp_path / "r" / "data_docs" / "index.html").exists()


def test_a_table_not_built_yet_fails_the_check(project, tmp_path):
    report = run_checks(project, table="dwd_orders", report_dir=tmp_path / "r", now=NOW)
    assert report.exit_code == 1
    t = json.loads(report.results_path.read_text())["tables"]["dwd_orders"]
    assert t["status"] == "not_built" and t["success"] is False
    assert "is not built yet" in t["message"] and "warehouse run --layer dwd" in t["message"]


def test_incremental_checks_only_rows_added_since_the_last_check(project, tmp_path):
    write(project, "ods_orders", orders(["a", "b", "b"], [1, 2, 3], age=timedelta(0)))
    first = run_checks(project, table="ods_orders", incremental=True,
                       report_dir=tmp_path / "r1", now=NOW)  # fmt: skip
    assert first.exit_code == 1  # `b` twice
    state = json.loads((Path(project.root) / "quality" / "state.json").read_text())
    assert state["tables"]["ods_orders"]["version"] == 0

    write(project, "ods_orders", orders(["c", "d"], [4, 5], age=timedelta(0)), mode="append")
    second = run_checks(project, table="ods_orders", incremental=True,
                        report_dir=tmp_path / "r2", now=NOW)  # fmt: skip
    t = json.loads(second.results_path.read_text())["tables"]["ods_orders"]
    assert (second.exit_code, t["rows"], t["from_version"], t["delta_version"]) == (0, 2, 1, 1)
    assert (
        by_id({"tables": {"t": t}}, "t")["expect_table_row_count_to_be_between()"]["observed_value"]
        == 2
    )

    third = run_checks(project, table="ods_orders", incremental=True,
                       report_dir=tmp_path / "r3", now=NOW)  # fmt: skip
    assert third.exit_code == 0
    assert third.tables[0].status == "no_new_rows"

    full = run_checks(project, table="ods_orders", report_dir=tmp_path / "r4", now=NOW)
    assert full.exit_code == 1 and full.tables[0].rows == 5


def run_cli(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GX_ANALYTICS_ENABLED": "false"}
    return subprocess.run(
        [sys.executable, "-m", "warehouse.cli.main", "--project", str(project.path), "check",
         *args],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


def test_cli_exits_1_and_prints_the_summary_when_an_expectation_fails(project, tmp_path):
    # Exit 0 is `report.exit_code` (tested above), which `warehouse check` returns as is;
    # one process start (great-expectations takes seconds to import) is enough here.
    write(project, "ods_users", pa.table({"user_id": ["u1", None], "city": ["Oslo", "Rome"]}))
    failing = run_cli(project, "--table", "ods_users", "--report", str(tmp_path / "bad"))
    assert failing.returncode == 1, failing.stdout + failing.stderr
    lines = [line.split() for line in failing.stdout.splitlines()]
    assert ["ods_users", "expect_column_values_to_not_be_null(user_id)", "FAIL", "1"] in lines
    assert ["ods_users", "expect_compound_columns_to_be_unique(user_id,", "city)", "PASS", "0"] in (
        lines
    )
    assert json.loads((tmp_path / "bad" / "results.json").read_text())["success"] is False
    assert (tmp_path / "bad" / "data_docs" / "index.html").exists()


def test_every_non_extension_type_is_a_great_expectations_type():
    import great_expectations.expectations as gxe

    from warehouse.quality.gx_suite import gx_class_name
    from warehouse.spec.expectations import EXPECTATION_TYPES

    for etype in EXPECTATION_TYPES.values():
        if not etype.extension:
            assert hasattr(gxe, gx_class_name(etype.name)), etype.name
