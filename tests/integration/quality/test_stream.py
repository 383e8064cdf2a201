"""Row checks inside a real streaming query's foreachBatch, into real Delta tables."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.errors import StreamingQueryException

from streams.delta import DeltaTarget, write_batch
from streams.delta.arrow import read_table
from warehouse.quality.events import quality_summary, read_quality_events, write_quality_events
from warehouse.quality.rows import RowChecks
from warehouse.spec.table import Expectation

pytestmark = pytest.mark.spark

TS = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
SCHEMA = (
    "order_id string, amount int, _topic string, _partition int, _offset bigint, "
    "_timestamp timestamp"
)
NOT_NULL = "expect_column_values_to_not_be_null(order_id)"
POSITIVE = "expect_column_values_to_be_between(amount)"


def land(folder: Path, name: str, rows: list[tuple], *, order: int) -> None:
    """One Parquet file of source rows; one batch per file, in `order` (file time)."""
    folder.mkdir(parents=True, exist_ok=True)
    cols = list(zip(*rows, strict=True))
    pq.write_table(
        pa.table(
            {
                "order_id": pa.array(cols[0], pa.string()),
                "amount": pa.array(cols[1], pa.int32()),
                "_topic": pa.array(["orders"] * len(rows), pa.string()),
                "_partition": pa.array(cols[2], pa.int32()),
                "_offset": pa.array(cols[3], pa.int64()),
                "_timestamp": pa.array([TS] * len(rows), pa.timestamp("us", tz="UTC")),
            }
        ),
        folder / name,
    )
    stamp = 1_700_000_000 + order
    os.utime(folder / name, (stamp, stamp))


def run_stream(
    spark,
    src: Path,
    root: Path,
    expectations: list[dict],
    *,
    table: str,
    engine: str = "python",
) -> None:
    checks = RowChecks.compile(
        [Expectation.model_validate(e) for e in expectations],
        spark.createDataFrame([], SCHEMA).schema,
        table=table,
    )
    tables = root / "tables"

    def each_batch(batch_df, batch_id: int) -> None:
        app = f"{table}:test"
        with checks.apply(batch_df, table=table, batch_id=batch_id) as out:
            write_batch(out.keep, batch_id, DeltaTarget(tables / table, app_id=app, engine=engine))
            if out.quarantine is not None:
                write_batch(
                    out.quarantine,
                    batch_id,
                    DeltaTarget(
                        tables / f"{table}__quarantine", app_id=f"{app}:quarantine", engine=engine
                    ),
                )
            write_quality_events(spark, root, out.metrics, app_id=app, batch_id=batch_id)

    query = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(src))
        .writeStream.foreachBatch(each_batch)
        .option("checkpointLocation", str(root / "checkpoints" / table))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(timeout=300)
    finally:
        query.stop()
    if query.exception() is not None:
        raise query.exception()


def test_quarantine_drop_and_warn_in_a_stream_with_quality_events(spark, tmp_path, engine):
    src = tmp_path / "src"
    land(src, "part-0.parquet", order=0, rows=[("a", 1, 0, 10), (None, 2, 0, 11), ("c", -3, 0, 12)])
    land(src, "part-1.parquet", order=1, rows=[("d", 4, 1, 5), (None, -5, 1, 6)])
    run_stream(
        spark,
        src,
        tmp_path,
        [
            {"expect_column_values_to_not_be_null": {"column": "order_id"},
             "on_violation": "quarantine"},
            {"expect_column_values_to_be_between": {"column": "amount", "min_value": 0},
             "on_violation": "drop"},
            {"expect_column_values_to_be_in_set": {"column": "order_id", "value_set": ["a", "d"]}},
        ],
        table="ods_orders",
        engine=engine,
    )  # fmt: skip
    kept = read_table(str(tmp_path / "tables" / "ods_orders"))
    assert sorted(kept.column("order_id").to_pylist()) == ["a", "d"]

    q = read_table(str(tmp_path / "tables" / "ods_orders__quarantine"))
    got = sorted(
        (r["batch_id"], r["source_partition"], r["source_offset"], tuple(r["failed_expectations"]),
         r["source_topic"], r["row"], r["reason"])
        for r in q.to_pylist()
    )  # fmt: skip
    assert got == [
        (0, 0, 11, (NOT_NULL,), "orders", '{"order_id":null,"amount":2}',
         f"failed expectations: {NOT_NULL}"),
        (1, 1, 6, (NOT_NULL, POSITIVE), "orders", '{"order_id":null,"amount":-5}',
         f"failed expectations: {NOT_NULL}, {POSITIVE}"),
    ]  # fmt: skip
    assert all(t == TS for t in q.column("source_timestamp").to_pylist())

    events = read_quality_events(tmp_path, table="ods_orders").to_pylist()
    got_events = sorted(
        (e["batch_id"], e["expectation"], e["on_violation"], e["checked"], e["passed"], e["failed"])
        for e in events
    )
    in_set = "expect_column_values_to_be_in_set(order_id)"
    assert got_events == [
        (0, POSITIVE, "drop", 3, 2, 1),
        (0, in_set, "warn", 2, 1, 1),
        (0, NOT_NULL, "quarantine", 3, 2, 1),
        (1, POSITIVE, "drop", 2, 1, 1),
        (1, in_set, "warn", 1, 1, 0),
        (1, NOT_NULL, "quarantine", 2, 1, 1),
    ]
    summary = quality_summary(tmp_path, "ods_orders")
    assert summary["last_batch"]["batch_id"] == 1
    assert summary["totals"][NOT_NULL] == {"checked": 5, "passed": 3, "failed": 2, "batches": 2}
    assert summary["totals"][in_set]["failed"] == 1


def test_fail_stops_the_query_naming_table_expectation_and_rows(spark, tmp_path):
    src = tmp_path / "src"
    land(src, "part-0.parquet", order=0, rows=[("a", 1, 0, 10), ("b", 2, 0, 11)])
    land(src, "part-1.parquet", order=1, rows=[("c", 3, 0, 12), ("bad", -7, 0, 13)])
    with pytest.raises(StreamingQueryException) as info:
        run_stream(
            spark, src, tmp_path,
            [{"expect_column_values_to_be_between": {"column": "amount", "min_value": 0},
              "on_violation": "fail"}],
            table="ods_orders",
        )  # fmt: skip
    text = str(info.value)
    assert "Table `ods_orders`" in text
    assert f"`{POSITIVE}` failed for 1 of 2 rows in batch 1" in text
    assert "'order_id': 'bad'" in text and "'_offset': 13" in text
    # Batch 0 was committed; the failing batch 1 was not.
    kept = read_table(str(tmp_path / "tables" / "ods_orders"))
    assert sorted(kept.column("order_id").to_pylist()) == ["a", "b"]
