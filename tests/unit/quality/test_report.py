"""`CheckReport`: exit codes, summary text and JSON-safe values (no GX, no Spark)."""

from __future__ import annotations

import json
import math
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

from warehouse.quality.gx_suite import gx_class_name, plain
from warehouse.quality.report import CheckReport, TableResult

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def exp(name: str, success: bool, unexpected: int | None = 0, error: str | None = None) -> dict:
    return {"expectation": name, "success": success, "unexpected_count": unexpected,
            "error": error}  # fmt: skip


def report(*tables: TableResult) -> CheckReport:
    return CheckReport(tables=list(tables), report_dir=Path("/r"), started_at=T0)


def test_exit_code_is_1_when_any_expectation_or_table_fails():
    ok = TableResult("a", "ods", "/t/a", "passed", expectations=[exp("e1", True)])
    empty = TableResult("b", "ods", "/t/b", "no_new_rows")
    assert report(ok, empty).exit_code == 0
    bad = TableResult("c", "dwd", "/t/c", "failed", expectations=[exp("e2", False, 3)])
    assert report(ok, bad).exit_code == 1
    missing = TableResult("d", "dwd", "/t/d", "not_built", message="not built yet")
    assert report(ok, missing).exit_code == 1
    assert report().exit_code == 0


def test_summary_lists_table_expectation_result_and_unexpected():
    text = report(
        TableResult("ods_orders", "ods", "/t", "failed",
                    expectations=[exp("nn(order_id)", True), exp("unique(order_id)", False, 2),
                                  exp("fresh(ts)", False, None, "no value")]),
        TableResult("dwd_orders", "dwd", "/t", "not_built", message="run it first"),
    ).summary_text()  # fmt: skip
    assert text.splitlines() == [
        "TABLE       EXPECTATION       RESULT     UNEXPECTED",
        "ods_orders  nn(order_id)      PASS       0",
        "ods_orders  unique(order_id)  FAIL       2",
        "ods_orders  fresh(ts)         FAIL       error: no value",
        "dwd_orders  -                 NOT BUILT  run it first",
        "",
        "3 failed; report: /r/results.json",
    ]


def test_to_dict_counts_and_is_json():
    r = report(TableResult("a", "ods", "/t/a", "failed", rows=4, delta_version=2,
                           expectations=[exp("e1", True), exp("e2", False, 1)]))  # fmt: skip
    d = json.loads(json.dumps(r.to_dict()))
    assert d["success"] is False
    assert d["statistics"] == {"tables": 1, "tables_failed": 1, "expectations": 2,
                               "expectations_failed": 1}  # fmt: skip
    assert d["tables"]["a"]["rows"] == 4 and d["tables"]["a"]["delta_version"] == 2


def test_plain_makes_values_json_safe():
    assert plain({"a": [math.nan, 1.5, Decimal("2.10"), b"\x01", date(2026, 1, 2), T0]}) == {
        "a": [None, 1.5, "2.10", "01", "2026-01-02", "2026-01-01T00:00:00+00:00"]
    }


def test_gx_class_names():
    assert gx_class_name("expect_column_values_to_not_be_null") == "ExpectColumnValuesToNotBeNull"
    assert gx_class_name("expect_column_pair_values_a_to_be_greater_than_b") == (
        "ExpectColumnPairValuesAToBeGreaterThanB"
    )
