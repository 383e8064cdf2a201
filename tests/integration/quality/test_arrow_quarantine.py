"""Held rows' quarantine rows built in Arrow (`HeldRows`) are those Spark's path builds
(`RowChecks.quarantined`), `row` included: the payload's JSON as Spark's `to_json`
writes it, doubles through the JVM (`java_doubles`). Edge values and generated ones
(hypothesis), compared column by column with Spark's. Real Spark.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.delta import arrow_schema
from warehouse.quality.arrow_quarantine import HeldRows, row_json, timestamps_in_range
from warehouse.quality.arrow_rows import arrow_checks
from warehouse.quality.quarantine import QUARANTINE_SCHEMA, java_doubles
from warehouse.quality.rows import RowChecks
from warehouse.spec.table import Expectation

pytestmark = pytest.mark.spark

UTC = dt.UTC
PAYLOAD = pa.schema(
    [
        ("i", pa.int64()),
        ("q", pa.int32()),
        ("d", pa.float64()),
        ("s", pa.string()),
        ("b", pa.bool_()),
        ("t", pa.timestamp("us", "UTC")),
    ]
)
COORDS = pa.schema(
    [
        ("_topic", pa.string()),
        ("_partition", pa.int32()),
        ("_offset", pa.int64()),
        ("_timestamp", pa.timestamp("us", "UTC")),
    ]
)
DOUBLES = [
    0.0, -0.0, 1.0, -1.5, 0.1, 1 / 3, 100.0, 1e7, 9999999.0, 1e-3, 0.00099, 1e16, 1e23, 2e23,
    5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 2.82879384806159e17,
    1.18575755e-316, 8.41e21, 4.35e-4, 123456789.125, 2.0e-3, 1.0e-5,
]  # fmt: skip
"""Values whose `Double.toString` differs between JDKs, or is easily got wrong: the
boundaries of Java's plain and computerized forms, subnormals, non-shortest outputs of
JDK 17."""
STRINGS = [
    "", "Oslo", 'say "hi"', "back\\slash", "a/b", "tab\there", "nl\nx", "cr\rx", "\b\f",
    "\x00\x01\x1f\x7f", "é ü € 😀", "\u2028\u2029", "</script>", "'single'",
]  # fmt: skip
TIMES = [
    dt.datetime(2026, 11, 26, 1, 2, 3, tzinfo=UTC),
    dt.datetime(2026, 11, 26, 1, 2, 3, 999999, tzinfo=UTC),
    dt.datetime(1969, 12, 31, 23, 59, 59, 500, tzinfo=UTC),
    dt.datetime(1000, 1, 1, tzinfo=UTC),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
]


def _exp(kind: str, on: str, **kwargs) -> Expectation:
    return Expectation(type=kind, kwargs=kwargs, on_violation=on)


EXPECTATIONS = [
    _exp("expect_column_values_to_not_be_null", "quarantine", column="i"),
    _exp("expect_column_values_to_be_between", "warn", column="d", min_value=0),
    _exp("expect_column_value_lengths_to_be_between", "quarantine", column="s", max_value=3),
    _exp("expect_column_values_to_be_in_set", "drop", column="q", value_set=[1, 2]),
]


def _rows(columns: dict[str, list]) -> pa.RecordBatch:
    n = len(next(iter(columns.values())))
    payload = {f.name: pa.array(columns.get(f.name, [None] * n), f.type) for f in PAYLOAD}
    coords = {
        "_topic": pa.array(["t"] * n),
        "_partition": pa.array([k % 3 for k in range(n)], pa.int32()),
        "_offset": pa.array(range(n), pa.int64()),
        "_timestamp": pa.array([1_764_000_000_000_000 + k for k in range(n)], COORDS[3].type),
    }
    return pa.RecordBatch.from_pydict(
        {**payload, **coords}, schema=pa.unify_schemas([PAYLOAD, COORDS])
    )


def _compare(spark, rows: pa.RecordBatch) -> None:
    checks = arrow_checks(EXPECTATIONS, rows.schema)
    assert checks is not None
    held = rows.filter(checks.judge(rows).hold)
    assert timestamps_in_range(held.column("t"))
    schema = arrow_schema(QUARANTINE_SCHEMA)
    at = dt.datetime(2026, 11, 30, tzinfo=UTC)
    doubles = java_doubles(spark)
    assert doubles is not None
    mine = HeldRows("q", schema, 7, at, doubles).rows(held, PAYLOAD.names, checks.failed_ids(held))
    frame = spark.createDataFrame(pa.Table.from_batches([held]))
    checked = RowChecks.compile(EXPECTATIONS, frame.schema, table="t")
    spark_rows = checked.quarantined(frame, batch_id=7).toArrow()
    cols = [c for c in schema.names if c != "quarantined_at"]
    spark_rows = spark_rows.select(cols).sort_by("source_offset")
    mine = pa.Table.from_batches([mine]).select(cols).sort_by("source_offset")
    for c in cols:
        assert mine.column(c).to_pylist() == spark_rows.column(c).to_pylist(), c


def test_edge_values_are_written_as_spark_writes_them(spark) -> None:
    n = max(len(DOUBLES), len(STRINGS), len(TIMES))
    cyc = lambda xs: [xs[k % len(xs)] for k in range(n)]  # noqa: E731
    rows = _rows(
        {
            "i": [None] * n,  # every row held, by the not-null expectation
            "q": [k - 3 for k in range(n)],
            "d": cyc(DOUBLES),
            "s": cyc(STRINGS),
            "b": [None if k % 3 == 0 else k % 2 == 0 for k in range(n)],
            "t": [None if k % 7 == 6 else TIMES[k % len(TIMES)] for k in range(n)],
        }
    )
    _compare(spark, rows)
    # Nulls everywhere, and a row of each alone.
    _compare(spark, _rows({"i": [None, None]}))


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
            st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
            st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
            st.one_of(st.none(), st.text(max_size=8)),
            st.one_of(st.none(), st.booleans()),
            st.one_of(
                st.none(),
                st.datetimes(
                    min_value=dt.datetime(1000, 1, 1), max_value=dt.datetime(9999, 12, 31)
                ).map(lambda t: t.replace(tzinfo=UTC)),
            ),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_generated_rows_are_written_as_spark_writes_them(spark, values) -> None:
    rows = _rows(dict(zip(PAYLOAD.names, map(list, zip(*values, strict=True)), strict=True)))
    checks = arrow_checks(EXPECTATIONS, rows.schema)
    if not pa.compute.any(checks.judge(rows).hold).as_py():
        return
    _compare(spark, rows)


def test_row_json_refuses_a_type_it_does_not_write() -> None:
    rows = pa.record_batch({"x": pa.array([dt.date(2026, 1, 1)])})
    with pytest.raises(TypeError, match="`x`"):
        row_json(rows, ["x"], lambda v: [repr(x) for x in v])
