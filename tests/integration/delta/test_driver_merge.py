"""A small native upsert merged on the driver and committed through delta-spark's
transaction (`streams.delta.driver_merge`): the same table and change feed as
delta-spark's MERGE of the same changes, a replay that writes nothing, and the MERGE
operation in the table's history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from delta.tables import DeltaTable

from streams.delta import DeltaTarget, write_batch

pytestmark = [pytest.mark.spark, pytest.mark.native]

# (id, v, _deleted): a change of key `id`, a delete when `_deleted`
BATCHES = [
    [(1, "a", False), (2, "b", False), (3, "c", False)],
    [(2, "b2", False), (4, "d", False)],
    [(1, None, True), (3, "c2", False), (9, None, True)],  # a delete, an update, a no-op
    [(1, "a3", False), (4, None, True), (5, "e", False)],
]


def _frame(spark, rows):
    """A batch as the writer's general path gives it: persisted and counted, so Spark
    knows its size and the sink collects a small one (`_collect_few`)."""
    frame = spark.createDataFrame(rows, "id long, v string, _deleted boolean").cache()
    frame.count()
    return frame


def _twin(spark, path: str, batches) -> None:
    """The same changes through delta-spark's MERGE, one commit a batch."""
    first = _frame(spark, batches[0]).drop("_deleted").limit(0)
    first.write.format("delta").option("delta.enableChangeDataFeed", "true").save(path)
    for rows in batches:
        source = _frame(spark, rows)
        (
            DeltaTable.forPath(spark, path)
            .alias("t")
            .merge(source.alias("s"), "t.id = s.id")
            .whenMatchedDelete("s._deleted")
            .whenMatchedUpdate("NOT s._deleted", {"id": "s.id", "v": "s.v"})
            .whenNotMatchedInsert("NOT s._deleted", {"id": "s.id", "v": "s.v"})
            .execute()
        )


def _rows(spark, path: str) -> list[tuple]:
    return sorted((tuple(r) for r in spark.read.format("delta").load(path).collect()), key=repr)


def _feed(spark, path: str, columns=("id", "v")) -> list[tuple]:
    """The table's change feed from version 1: `columns`, the change type and version."""
    feed = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 1)
        .load(path)
    )
    names = [*columns, "_change_type", "_commit_version"]
    return sorted((tuple(r[c] for c in names) for r in feed.collect()), key=repr)


def test_a_driver_merge_gives_delta_sparks_table_and_change_feed(spark, tmp_path: Path) -> None:
    target = DeltaTarget(
        str(tmp_path / "t"), mode="upsert", keys=("id",), app_id="a:q", engine="native"
    )
    versions = [write_batch(_frame(spark, rows), b, target) for b, rows in enumerate(BATCHES)]
    assert versions == [1, 2, 3, 4]
    twin = str(tmp_path / "twin")
    _twin(spark, twin, BATCHES)

    assert (
        _rows(spark, target.path)
        == _rows(spark, twin)
        == [(1, "a3"), (2, "b2"), (3, "c2"), (5, "e")]
    )
    assert _feed(spark, target.path) == _feed(spark, twin)

    # batches 1-3 were merged on the driver: Delta's MERGE operation, without the
    # metrics only delta-spark's MERGE command measures
    history = DeltaTable.forPath(spark, target.path).history().collect()
    by_version = {h["version"]: h for h in history}
    assert [by_version[v]["operation"] for v in (2, 3, 4)] == ["MERGE"] * 3
    assert not by_version[4]["operationMetrics"]
    assert by_version[1]["operationMetrics"]  # the first, into a new table: delta-spark's

    # a replay writes nothing, and a new batch after it goes on
    assert write_batch(_frame(spark, BATCHES[3]), 3, target) is None
    assert write_batch(_frame(spark, [(6, "f", False)]), 4, target) == 5
    assert _rows(spark, target.path)[-1] == (6, "f")


def test_a_timestamp_key_matches_the_rows_delta_spark_wrote(spark, tmp_path: Path) -> None:
    """A window's start as a key, as the example's aggregates have: the first batch is
    delta-spark's MERGE into the new table (its timestamps read back without a time
    zone), the next ones are merged on the driver and must update those rows, not add
    rows beside them."""
    import datetime as dt

    t0 = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.UTC)
    t1 = t0 + dt.timedelta(minutes=1)
    batches = [
        [(t0, "x", 1, False), (t0, "y", 2, False)],
        [(t0, "x", 3, False), (t1, "x", 4, False)],
        [(t0, "y", None, True), (t1, "x", 5, False)],
    ]
    schema = "window_start timestamp, city string, n long, _deleted boolean"
    target = DeltaTarget(
        str(tmp_path / "t"),
        mode="upsert",
        keys=("window_start", "city"),
        app_id="a:q",
        engine="native",
    )
    for b, rows in enumerate(batches):
        frame = spark.createDataFrame(rows, schema).cache()
        frame.count()
        assert write_batch(frame, b, target) == b + 1
    got = sorted(
        (r["window_start"].replace(tzinfo=dt.UTC), r["city"], r["n"])
        for r in spark.read.format("delta").load(target.path).collect()
    )
    assert got == [(t0, "x", 3), (t1, "x", 5)]
    history = DeltaTable.forPath(spark, target.path).history().collect()
    assert not {h["version"]: h for h in history}[3]["operationMetrics"]

    # the driver's file carries the statistics a reader skips files by, as delta-spark's do
    log = Path(target.path, "_delta_log", f"{3:020d}.json").read_text().splitlines()
    (stats,) = [json.loads(a["add"]["stats"]) for a in map(json.loads, log) if "add" in a]
    assert stats == {
        "numRecords": 2,
        "minValues": {"window_start": "2026-11-28T12:00:00.000Z", "city": "x", "n": 3},
        "maxValues": {"window_start": "2026-11-28T12:01:00.000Z", "city": "x", "n": 5},
        "nullCount": {"window_start": 0, "city": 0, "n": 0},
    }


# (id, v, seq, _deleted) for a sink with `sequence_by: seq`
SEQUENCED = [
    [(1, "a", 10, False), (2, "b", 10, False), (3, "c", None, False)],
    # older than its row (kept out), newer, a row without a sequence (replaced), an insert
    [(1, "a-old", 5, False), (2, "b2", 11, False), (3, "c2", 1, False), (4, "d", 1, False)],
    # a delete, an older delete (kept out), a change without a sequence (kept out)
    [(1, None, 20, True), (2, None, 9, True), (4, "d2", None, False)],
    # older than its key's tombstone (dropped before the merge), an insert, an update
    [(1, "a-late", 15, False), (5, "e", 1, False), (2, "b3", 12, False)],
]


def test_a_sequenced_upsert_on_the_driver_gives_delta_sparks_merge(spark, tmp_path: Path) -> None:
    """`sequence_by` on the driver: the same table, change feed and tombstones as the
    sink's delta-spark MERGE of the same batches. The twin is kept on delta-spark's MERGE
    by a table property the driver merge does not take (`delta.appendOnly`, false)."""
    schema = "id long, v string, seq long"

    def sink(name: str, **properties: str) -> DeltaTarget:
        path = str(tmp_path / name)
        writer = spark.createDataFrame([], schema).write.format("delta")
        for k, v in {"delta.enableChangeDataFeed": "true", **properties}.items():
            writer = writer.option(k, v)
        writer.save(path)
        return DeltaTarget(
            path, mode="upsert", keys=("id",), sequence_by="seq", app_id="a:q", engine="native"
        )

    target, twin = sink("t"), sink("twin", **{"delta.appendOnly": "false"})
    for b, rows in enumerate(SEQUENCED):
        for t in (target, twin):
            frame = spark.createDataFrame(rows, f"{schema}, _deleted boolean").cache()
            frame.count()
            assert write_batch(frame, b, t) == b + 1

    assert _rows(spark, target.path) == _rows(spark, twin.path)
    assert _rows(spark, target.path) == [(2, "b3", 12), (3, "c2", 1), (4, "d", 1), (5, "e", 1)]

    columns = ("id", "v", "seq")
    assert _feed(spark, target.path, columns) == _feed(spark, twin.path, columns)
    tombstones = [r[:2] for r in _rows(spark, target.path + "__tombstones")]
    assert (
        tombstones == [r[:2] for r in _rows(spark, twin.path + "__tombstones")] == [(1, 20), (2, 9)]
    )

    def metrics(path: str) -> list[bool]:
        history = DeltaTable.forPath(spark, path).history().collect()
        return [bool(h["operationMetrics"]) for h in sorted(history, key=lambda h: h["version"])]

    assert metrics(target.path)[1:] == [False] * 4  # every batch merged on the driver
    assert metrics(twin.path)[1:] == [True] * 4


# (user_id, city, _source_ts_ms, _op) for an SCD2 sink sequenced by `_source_ts_ms`
SCD2_BATCHES = [
    [(1, "Oslo", 100, "c"), (2, "Rome", 100, "c")],
    # a new version, a delete, a key never seen
    [(1, "Bergen", 200, "u"), (2, None, 200, "d"), (3, "Lima", 150, "c")],
    # a stale change, a change and a reinsert of the deleted key in one batch
    [(1, "Oslo", 150, "u"), (3, "Cusco", 300, "u"), (3, "Lima", 400, "u"), (2, "Rome", 500, "c")],
]


def test_an_scd2_batch_on_the_driver_gives_delta_sparks_merge(spark, tmp_path: Path) -> None:
    """SCD2 on the driver: the same history and change feed as the sink's delta-spark
    MERGE of the same plans. Both tables are made first, as the sink makes them, the
    twin with a table property the driver merge does not take (`delta.appendOnly`)."""
    import pyarrow as pa
    from deltalake import DeltaTable as RsTable
    from deltalake import Schema

    from streams.delta.target import TABLE_CONFIGURATION

    utc = pa.timestamp("us", tz="UTC")
    stored = pa.schema(
        [
            ("user_id", pa.int64()),
            ("city", pa.string()),
            ("_source_ts_ms", pa.int64()),
            ("valid_from", utc),
            ("valid_to", utc),
            ("is_current", pa.bool_()),
        ]
    )

    def sink(name: str, **properties: str) -> DeltaTarget:
        path = str(tmp_path / name)
        config = {**TABLE_CONFIGURATION, **properties}
        RsTable.create(path, Schema.from_arrow(stored), configuration=config)
        return DeltaTarget(
            path,
            mode="scd2",
            keys=("user_id",),
            sequence_by="_source_ts_ms",
            app_id="a:q",
            engine="native",
        )

    target, twin = sink("t"), sink("twin", **{"delta.appendOnly": "false"})
    schema = "user_id long, city string, _source_ts_ms long, _op string"
    for b, rows in enumerate(SCD2_BATCHES):
        for t in (target, twin):
            assert write_batch(spark.createDataFrame(rows, schema), b, t) == b + 1

    assert _rows(spark, target.path) == _rows(spark, twin.path)
    current = sorted((r[0], r[1]) for r in _rows(spark, target.path) if r[5])
    assert current == [(1, "Bergen"), (2, "Rome"), (3, "Lima")]

    feed = _feed(spark, target.path, stored.names)
    assert feed == _feed(spark, twin.path, stored.names)
    assert {r[-2] for r in feed} == {"insert", "update_preimage", "update_postimage"}

    def merged_on_driver(path: str) -> list[bool]:
        history = DeltaTable.forPath(spark, path).history().collect()
        return [
            h["operation"] == "MERGE" and not h["operationMetrics"]
            for h in sorted(history, key=lambda h: h["version"])
        ][1:]

    assert merged_on_driver(target.path) == [True] * 3
    assert merged_on_driver(twin.path) == [False] * 3
    # a replay writes nothing
    assert write_batch(spark.createDataFrame(SCD2_BATCHES[2], schema), 2, target) is None
