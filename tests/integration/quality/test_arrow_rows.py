"""`ArrowChecks` judges each row as `RowChecks` (Spark) does, and refuses what it cannot.

A table of edge values (nulls, NaN, infinities, bounds, multi-byte strings) is judged
by both: the rows kept, held and dropped and the per-expectation counts must agree.
Real Spark; the Arrow side runs as in the Arrow tasks, without Spark.
"""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest

from warehouse.quality.arrow_rows import arrow_checks
from warehouse.quality.rows import RowChecks
from warehouse.spec.table import Expectation

pytestmark = pytest.mark.spark

TABLE = pa.table(
    {
        "i": pa.array([1, None, -5, 0, 10, 7, 3, None, 2], pa.int64()),
        "q": pa.array([1, 2, None, 0, 9, 10, -1, 4, 5], pa.int32()),
        "d": pa.array(
            [0.5, math.nan, -0.0, None, math.inf, -math.inf, 2.0, 1e300, 0.0], pa.float64()
        ),
        "s": pa.array(["a", "Oslo", None, "ééé", "", "Bergen!!", "x y", "ab", "Oslo"]),
        "b": pa.array([True, False, None, True, False, True, None, False, True]),
    }
)


def _exp(kind: str, on: str, **kwargs) -> Expectation:
    return Expectation(type=kind, kwargs=kwargs, on_violation=on)


SUPPORTED = [
    _exp("expect_column_values_to_not_be_null", "quarantine", column="i"),
    _exp("expect_column_values_to_be_null", "warn", column="q"),
    _exp("expect_column_values_to_be_between", "drop", column="d", min_value=0),
    _exp("expect_column_values_to_be_between", "warn", column="d", max_value=1, strict_max=True),
    _exp("expect_column_values_to_be_between", "quarantine", column="q", min_value=0, max_value=9),
    _exp("expect_column_values_to_be_between", "warn", column="i", min_value=0.5, strict_min=True),
    _exp("expect_column_value_lengths_to_be_between", "drop", column="s", max_value=3),
    _exp("expect_column_value_lengths_to_equal", "warn", column="s", value=3),
    _exp("expect_column_values_to_be_in_set", "warn", column="s", value_set=["Oslo", "a"]),
    _exp("expect_column_values_to_not_be_in_set", "warn", column="i", value_set=[1, 2]),
    _exp("expect_column_values_to_be_in_set", "warn", column="b", value_set=[True]),
    _exp("expect_column_pair_values_a_to_be_greater_than_b", "warn", column_A="d", column_B="i"),
    _exp(
        "expect_column_pair_values_a_to_be_greater_than_b",
        "warn",
        column_A="i",
        column_B="q",
        or_equal=True,
    ),
]


SPARK_TYPES = "k int, i bigint, q int, d double, s string, b boolean"


def _named(exps: list[Expectation]) -> list[Expectation]:
    return [e.model_copy(update={"name": f"e{k}"}) for k, e in enumerate(exps)]


def test_arrow_judges_each_row_as_spark(spark) -> None:
    exps = _named(SUPPORTED)
    checks = arrow_checks(exps, TABLE.schema)
    assert checks is not None and checks.size == len(exps)
    verdict = checks.judge(TABLE.to_batches()[0])

    rows = [(k, *r.values()) for k, r in enumerate(TABLE.to_pylist())]
    df = spark.createDataFrame(rows, SPARK_TYPES)
    checked = RowChecks.compile(exps, df.schema, table="t").apply(df, table="t", batch_id=0)
    try:
        kept = sorted(r.k for r in checked.keep.select("k").collect())
        quarantine = checked.quarantine.collect() if checked.quarantine is not None else []
        held = sorted(json.loads(r.row)["k"] for r in quarantine)
        metrics = [(m["checked"], m["failed"]) for m in checked.metrics]
    finally:
        checked.unpersist()

    assert [k for k, keep in enumerate(verdict.keep.to_pylist()) if keep] == kept
    assert [k for k, hold in enumerate(verdict.hold.to_pylist()) if hold] == held
    assert list(zip(verdict.checked, verdict.failed, strict=True)) == metrics
    assert held and len(kept) < len(rows)  # the table exercises quarantine and drop


@pytest.mark.parametrize(
    "exp",
    [
        _exp("expect_column_values_to_match_regex", "warn", column="s", regex="^O"),
        _exp("expect_column_values_to_not_be_null", "fail", column="i"),
        _exp("expect_column_values_to_be_in_set", "warn", column="d", value_set=[0.5]),
        _exp("expect_column_values_to_be_in_set", "warn", column="s", value_set=["a", 1]),
        _exp("expect_column_values_to_be_in_set", "warn", column="i", value_set=[1, None]),
        _exp("expect_column_values_to_be_between", "warn", column="s", min_value="a"),
        _exp("expect_column_values_to_be_between", "warn", column="i", min_value="1"),
        _exp("expect_column_values_to_be_of_type", "warn", column="i", type_="int"),
        _exp("expect_column_values_to_not_be_null", "warn", column="missing"),
    ],
)
def test_what_arrow_cannot_judge_as_spark_keeps_the_table_off_the_path(exp) -> None:
    assert arrow_checks([exp], TABLE.schema) is None
