"""Append sink: exactly-once per (app_id, batch_id), commit info, schema evolution,
partitioning, stats, maintenance. Real Spark, real Delta tables in tmp_path."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import Row

from streams.delta import (
    DeltaSchemaError,
    DeltaTarget,
    optimize,
    table_info,
    vacuum,
    write_batch,
)
from tests.integration.delta.frames import assert_rows

pytestmark = pytest.mark.spark


def _orders(spark, ids: range, day: str = "2024-01-01"):
    return spark.createDataFrame(
        [(i, f"user{i % 3}", float(i) * 1.5, day) for i in ids],
        "order_id long, user_id string, amount double, event_date string",
    )


def test_replaying_a_batch_is_a_no_op(spark, tmp_path: Path, read_table) -> None:
    target = DeltaTarget(str(tmp_path / "t"), app_id="orders:q1")
    assert write_batch(_orders(spark, range(5)), 0, target) == 0
    assert write_batch(_orders(spark, range(5, 8)), 1, target) == 1
    before = table_info(target.path)
    assert write_batch(_orders(spark, range(5, 8)), 1, target) is None
    assert write_batch(_orders(spark, range(100, 200)), 0, target) is None
    assert table_info(target.path)["version"] == before["version"] == 1
    assert_rows(read_table(target.path).select("order_id"), [Row(order_id=i) for i in range(8)])
    # Another app id (a new checkpoint) is not blocked by the first one's batch numbers.
    other = DeltaTarget(target.path, app_id="orders:q2")
    assert write_batch(_orders(spark, range(8, 9)), 0, other) == 2
    dt_ = DeltaTable(target.path)
    assert (dt_.transaction_version("orders:q1"), dt_.transaction_version("orders:q2")) == (1, 0)


def test_commit_carries_txn_and_commit_info(spark, tmp_path: Path) -> None:
    target = DeltaTarget(str(tmp_path / "t"), app_id="orders:q1", table="orders")
    info = {
        "warehouse.sourceOffsets": json.dumps({"orders": {"0": 5}}),
        "warehouse.batchId": 0,
        "warehouse.table": "orders",
    }
    write_batch(_orders(spark, range(5)), 0, target, commit_info=info)
    [commit] = DeltaTable(target.path).history(1)
    assert json.loads(commit["warehouse.sourceOffsets"]) == {"orders": {"0": 5}}
    assert commit["warehouse.table"] == "orders" and commit["warehouse.batchId"] == "0"
    log = (Path(target.path) / "_delta_log" / f"{0:020d}.json").read_text()
    assert {"txn": {"appId": "orders:q1", "version": 0}} in [
        json.loads(x) for x in log.splitlines()
    ]
    meta = table_info(target.path)
    assert meta["rows"] == 5 and meta["last_commit"]["offsets"] == {"orders": {"0": 5}}
    assert meta["last_commit"]["batch_id"] == 0


def test_empty_batch_still_records_the_transaction(spark, tmp_path: Path) -> None:
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q")
    assert write_batch(_orders(spark, range(0)), 0, target) == 0
    assert write_batch(_orders(spark, range(3)), 1, target) == 1
    assert write_batch(_orders(spark, range(0)), 2, target) == 2
    dt_ = DeltaTable(target.path)
    assert dt_.transaction_version("a:q") == 2
    assert table_info(target.path)["rows"] == 3


def test_partitioned_table_keeps_values_and_file_stats(spark, tmp_path: Path, read_table) -> None:
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q", partition_by=["event_date"])
    write_batch(_orders(spark, range(4), "2024-01-01"), 0, target)
    write_batch(_orders(spark, range(4, 6), "2024-01-02"), 1, target)
    dirs = sorted(p.name for p in Path(target.path).iterdir() if p.is_dir())
    assert dirs == ["_delta_log", "event_date=2024-01-01", "event_date=2024-01-02"]
    assert DeltaTable(target.path).metadata().partition_columns == ["event_date"]
    adds = pa.table(DeltaTable(target.path).get_add_actions(flatten=True)).to_pylist()
    day2 = [a for a in adds if a["partition.event_date"] == "2024-01-02"]
    assert sum(a["num_records"] for a in day2) == 2
    assert min(a["min.order_id"] for a in day2) == 4 and max(a["max.order_id"] for a in day2) == 5
    assert_rows(
        read_table(target.path).select("order_id", "event_date"),
        [Row(order_id=i, event_date="2024-01-01" if i < 4 else "2024-01-02") for i in range(6)],
    )
    with pytest.raises(DeltaSchemaError, match="partitioned by"):
        write_batch(
            _orders(spark, range(1)),
            2,
            DeltaTarget(target.path, app_id="a:q", partition_by=["user_id"]),
        )


def test_missing_partition_column_is_named(spark, tmp_path: Path) -> None:
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q", partition_by=["day"])
    with pytest.raises(DeltaSchemaError) as info:
        write_batch(_orders(spark, range(2)), 0, target)
    assert info.value.column == "day" and target.path in str(info.value)


def test_added_columns_merge_into_the_schema(spark, tmp_path: Path, read_table) -> None:
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q")
    write_batch(spark.createDataFrame([(1, "a")], "id long, name string"), 0, target)
    write_batch(
        spark.createDataFrame([(2, "b", dt.date(2024, 5, 1))], "id long, name string, d date"),
        1,
        target,
    )
    write_batch(spark.createDataFrame([(3,)], "id long"), 2, target)
    assert [f.name for f in DeltaTable(target.path).schema().fields] == ["id", "name", "d"]
    assert_rows(
        read_table(target.path),
        [
            Row(id=1, name="a", d=None),
            Row(id=2, name="b", d=dt.date(2024, 5, 1)),
            Row(id=3, name=None, d=None),
        ],
    )


def test_type_change_is_refused_with_the_table_path(spark, tmp_path: Path) -> None:
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q")
    write_batch(spark.createDataFrame([(1, "a")], "id long, name string"), 0, target)
    with pytest.raises(DeltaSchemaError) as info:
        write_batch(spark.createDataFrame([("x", "a")], "id string, name string"), 1, target)
    assert info.value.column == "id" and target.path in str(info.value)
    assert DeltaTable(target.path).transaction_version("a:q") == 0


def test_timestamps_round_trip_in_utc(spark, tmp_path: Path, read_table) -> None:
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q")
    ts = dt.datetime(2024, 1, 1, 10, 30, 0, 123456)
    write_batch(spark.createDataFrame([(1, ts)], "id long, ts timestamp"), 0, target)
    assert_rows(read_table(target.path), [Row(id=1, ts=ts)])


def test_optimize_and_vacuum_keep_the_rows(spark, tmp_path: Path, read_table) -> None:
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q")
    for b in range(4):
        write_batch(_orders(spark, range(b * 10, b * 10 + 10)), b, target)
    files_before = table_info(target.path)["files"]
    metrics = optimize(target.path)
    assert metrics["numFilesRemoved"] == files_before and table_info(target.path)["files"] == 1
    deleted = vacuum(target.path, retention_hours=0)
    assert len(deleted) == files_before
    assert table_info(target.path)["rows"] == 40
    assert_rows(read_table(target.path).select("order_id"), [Row(order_id=i) for i in range(40)])
    assert DeltaTable(target.path).transaction_version("a:q") == 3


def test_optimize_every_compacts_automatically(spark, tmp_path: Path) -> None:
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q", optimize_every=3)
    for b in range(4):
        write_batch(_orders(spark, range(b * 5, b * 5 + 5)), b, target)
    ops = [c["operation"] for c in reversed(DeltaTable(target.path).history())]
    assert ops == ["CREATE TABLE", "WRITE", "WRITE", "WRITE", "OPTIMIZE"]
    assert table_info(target.path)["rows"] == 20
