"""`read_delta_stream`: every version exactly once, in both modes, across restarts and
concurrent appends."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyspark.sql import Row

from streams.delta import (
    DeltaTableNotFoundError,
    DeltaTarget,
    optimize,
    read_delta_stream,
    write_batch,
)
from tests.support.rows import assert_rows

pytestmark = pytest.mark.spark


def _append(path: Path, ids: list[int]) -> None:
    write_deltalake(str(path), pa.table({"id": pa.array(ids, pa.int64())}), mode="append")


def _run(df, ckpt: Path, *, available_now: bool = True) -> list[tuple[int, list[Row]]]:
    """Run the stream to the end of what is there; return (batch id, rows) per batch."""
    seen: list[tuple[int, list[Row]]] = []
    q = (
        df.writeStream.foreachBatch(lambda b, i: seen.append((i, b.collect())))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(300)
    assert q.exception() is None
    return seen


def test_append_reads_each_version_once_one_per_trigger(spark, tmp_path: Path) -> None:
    table, ckpt = tmp_path / "t", tmp_path / "ckpt"
    for v in range(4):
        _append(table, [v * 10 + i for i in range(3)])
    optimize(table)  # a compaction commit must not repeat rows
    _append(table, [40])
    df = read_delta_stream(spark, str(table), max_versions_per_trigger=1)
    batches = _run(df, ckpt)
    ids = [sorted(r.id for r in rows) for _, rows in batches]
    assert [x for x in ids if x] == [[0, 1, 2], [10, 11, 12], [20, 21, 22], [30, 31, 32], [40]]
    # Restart on the same checkpoint: only what was appended since.
    _append(table, [50, 51])
    again = _run(read_delta_stream(spark, str(table), max_versions_per_trigger=1), ckpt)
    assert [sorted(r.id for r in rows) for _, rows in again if rows] == [[50, 51]]


def test_append_stream_over_concurrent_appends_misses_and_repeats_nothing(
    spark, tmp_path: Path
) -> None:
    table, ckpt = tmp_path / "t", tmp_path / "ckpt"
    _append(table, [0])
    n_versions = 15

    def writer() -> None:
        for v in range(1, n_versions):
            _append(table, [v * 2, v * 2 + 1])

    seen: list[int] = []
    df = read_delta_stream(spark, str(table), max_versions_per_trigger=1)
    q = (
        df.writeStream.foreachBatch(lambda b, i: seen.extend(r.id for r in b.collect()))
        .option("checkpointLocation", str(ckpt))
        .start()
    )
    t = threading.Thread(target=writer)
    t.start()
    t.join()
    q.processAllAvailable()
    q.stop()
    expected = [0] + [x for v in range(1, n_versions) for x in (v * 2, v * 2 + 1)]
    assert sorted(seen) == expected


def test_changes_read_the_change_feed_of_an_upsert_table(spark, tmp_path: Path) -> None:
    target = DeltaTarget(
        str(tmp_path / "u"), mode="upsert", keys=["k"], sequence_by="s", app_id="u:q"
    )
    schema = "k long, v string, s long, _op string"
    write_batch(spark.createDataFrame([(1, "a", 1, "c"), (2, "b", 1, "c")], schema), 0, target)
    write_batch(spark.createDataFrame([(1, "a2", 2, "u"), (2, None, 2, "d")], schema), 1, target)
    df = read_delta_stream(spark, target.path, read="changes")
    assert df.columns == ["k", "v", "s", "_change_type", "_commit_version", "_commit_timestamp"]
    rows = [r for _, b in _run(df, tmp_path / "ckpt") for r in b]
    got = spark.createDataFrame(rows, df.schema).drop("_commit_timestamp")
    assert_rows(
        got,
        [
            Row(k=1, v="a", s=1, _change_type="insert", _commit_version=1),
            Row(k=2, v="b", s=1, _change_type="insert", _commit_version=1),
            Row(k=1, v="a", s=1, _change_type="update_preimage", _commit_version=2),
            Row(k=1, v="a2", s=2, _change_type="update_postimage", _commit_version=2),
            Row(k=2, v="b", s=1, _change_type="delete", _commit_version=2),
        ],
    )


def test_append_read_of_a_merged_table_says_use_changes(spark, tmp_path: Path) -> None:
    target = DeltaTarget(str(tmp_path / "u"), mode="upsert", keys=["k"], app_id="u:q")
    schema = "k long, v string"
    write_batch(spark.createDataFrame([(1, "a")], schema), 0, target)
    write_batch(spark.createDataFrame([(1, "b")], schema), 1, target)
    q = (
        read_delta_stream(spark, target.path)
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="use `read: changes`|Use `read: changes`"):
        q.awaitTermination(300)


def test_missing_table_names_the_path(spark, tmp_path: Path) -> None:
    with pytest.raises(DeltaTableNotFoundError) as info:
        read_delta_stream(spark, str(tmp_path / "nope"))
    assert "run the upstream table first" in str(info.value).lower()
    assert str(tmp_path / "nope") in str(info.value)


def test_a_workers_snapshot_read_leaves_the_collector_its_own_objects(
    spark, tmp_path: Path
) -> None:
    """Spark's daemon collects garbage after every task a reused Python worker runs, a
    walk over every object the worker tracks. A worker that has read a table has frozen
    what it imported (`streams._worker_gc`): the walk is over what its tasks allocated."""
    from pyspark.sql.types import LongType, StructField, StructType

    table = tmp_path / "t"
    _append(table, [1, 2, 3])
    path = str(table)
    schema = StructType([StructField("id", LongType())])

    def task(_partition):
        import gc

        from pyspark.sql.datasource import InputPartition

        from streams.delta.source import DeltaSnapshotReader

        counts = []
        for _ in range(2):  # a worker's first read of a table, and its next
            batches = list(DeltaSnapshotReader(path, schema).read(InputPartition(0)))
            counts.append((sum(b.num_rows for b in batches), len(gc.get_objects())))
        yield counts, gc.get_freeze_count()

    [(counts, frozen)] = spark.sparkContext.parallelize([0], 1).mapPartitions(task).collect()
    assert [rows for rows, _ in counts] == [3, 3]
    # pyspark, pyarrow, delta-rs's bindings and this package: tens of thousands.
    assert frozen > 20_000
    # The first read imports what reading needs (delta-rs's tables, pyarrow's datasets),
    # which the next read freezes; from then on the collector walks only what tasks add.
    assert counts[1][1] < frozen / 10, (counts, frozen)
