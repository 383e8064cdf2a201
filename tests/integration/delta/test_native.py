"""The native engine (delta-spark) beside the Python one: the same contract, and tables
that either engine writes and the other reads (same protocol, same columns)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import Row

from streams.delta import (
    DeltaTarget,
    delta_engine,
    read_delta_stream,
    read_table,
    recorded_offsets,
    write_batch,
)
from streams.delta.target import CHECKPOINT_INTERVAL, TABLE_CONFIGURATION
from tests.support.rows import assert_rows

pytestmark = [pytest.mark.spark, pytest.mark.native]

OTHER = {"python": "native", "native": "python"}


def test_native_append_is_idempotent_and_records_offsets(spark, tmp_path: Path, engine) -> None:
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q", engine=engine)
    info = {"warehouse.sourceOffsets": '{"t": {"0": 2}}'}
    df = spark.createDataFrame([Row(id=1), Row(id=2)])
    assert write_batch(df, 0, target, commit_info=info) == 0
    assert write_batch(df, 0, target, commit_info=info) is None  # a replay
    assert spark.read.format("delta").load(target.path).count() == 2
    assert recorded_offsets(target.path) == {"t": {"0": 2}}


def test_a_replay_is_recognised_from_the_writers_newest_commit(spark, tmp_path: Path) -> None:
    """A native append carries no app transaction (delta-spark would read the table's
    whole state to check one); the writer and batch in its commit info make a replay a
    no-op on either engine, a maintenance commit in between changes nothing, and a new
    writer's batch 0 (a new checkpoint) is not taken for a replay of the old one's."""
    native = DeltaTarget(str(tmp_path / "t"), app_id="a:q", engine="native")
    python = DeltaTarget(native.path, app_id="a:q", engine="python")
    df = spark.createDataFrame([Row(id=1), Row(id=2)])
    assert write_batch(df, 0, native) == 0
    assert write_batch(df, 1, native) == 1
    assert DeltaTable(native.path).transaction_version("a:q") is None
    assert write_batch(df, 1, python) is None
    assert write_batch(df, 1, native) is None
    delta_engine("native").optimize(spark, native.path)
    assert write_batch(df, 0, native) is None and write_batch(df, 1, python) is None
    assert spark.read.format("delta").load(native.path).count() == 4

    assert write_batch(df.limit(0), 2, native) == 3  # an empty batch is recorded too
    assert write_batch(df, 2, python) is None

    fresh = DeltaTarget(native.path, app_id="a:q2", engine="native")
    assert write_batch(df, 0, fresh) == 4
    assert write_batch(df, 1, native) is None  # the first writer's batches stay recognised
    assert write_batch(df, 3, native) == 5
    assert spark.read.format("delta").load(native.path).count() == 8


@pytest.mark.parametrize("mode", ["append", "upsert"])
def test_either_engine_creates_a_table_with_the_same_properties(
    spark, tmp_path: Path, engine: str, mode: str
) -> None:
    """The change feed on and the log checkpointed every `CHECKPOINT_INTERVAL` commits,
    whichever engine creates the table. Eleven appends leave no checkpoint at version
    10, where delta-spark's own default would write one; an upsert's table, created by
    its first batch, has the same properties (a writer reads them from the table)."""
    keys = ["id"] if mode == "upsert" else []
    target = DeltaTarget(str(tmp_path / "t"), mode=mode, keys=keys, app_id="a:q", engine=engine)
    for batch in range(11 if mode == "append" else 1):
        write_batch(spark.createDataFrame([Row(id=batch % 3, n=batch)]), batch, target)
    table = DeltaTable(target.path)
    assert table.metadata().configuration == TABLE_CONFIGURATION
    if mode == "append":
        assert table.version() == 10
        assert CHECKPOINT_INTERVAL > table.version()
        assert not list((tmp_path / "t" / "_delta_log").glob("*.checkpoint*"))


def _changes(spark, path: str, engine: str, ckpt: Path) -> list[Row]:
    seen: list[Row] = []
    df = read_delta_stream(spark, path, read="changes", engine=engine)
    q = (
        df.writeStream.foreachBatch(lambda b, _i: seen.extend(b.collect()))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(300)
    assert q.exception() is None
    return seen


def test_a_table_written_by_one_engine_is_read_by_the_other(
    spark, tmp_path: Path, engine: str
) -> None:
    """`engine` writes an append and an upsert table; the other engine reads their
    snapshots and change feeds. The CDF is on whichever engine created the table."""
    reader = OTHER[engine]
    events = DeltaTarget(
        str(tmp_path / "events"), app_id="e:q", engine=engine, partition_by=["day"]
    )
    write_batch(spark.createDataFrame([(1, "d1"), (2, "d2")], "id long, day string"), 0, events)
    write_batch(spark.createDataFrame([(3, "d1")], "id long, day string"), 1, events)
    users = DeltaTarget(
        str(tmp_path / "users"),
        mode="upsert",
        keys=["user_id"],
        sequence_by="seq",
        app_id="u:q",
        engine=engine,
    )
    schema = "user_id long, city string, seq long, _op string"
    write_batch(spark.createDataFrame([(1, "rome", 1, "c"), (2, "oslo", 1, "c")], schema), 0, users)
    write_batch(spark.createDataFrame([(1, "bern", 2, "u"), (2, None, 2, "d")], schema), 1, users)

    expected_events = [Row(id=1, day="d1"), Row(id=2, day="d2"), Row(id=3, day="d1")]
    expected_users = [Row(user_id=1, city="bern", seq=2)]
    if reader == "python":
        assert sorted(read_table(events.path).to_pylist(), key=lambda r: r["id"]) == [
            r.asDict() for r in expected_events
        ]
        assert read_table(users.path).to_pylist() == [r.asDict() for r in expected_users]
    else:
        assert_rows(spark.read.format("delta").load(events.path), expected_events)
        assert_rows(spark.read.format("delta").load(users.path), expected_users)

    feed = _changes(spark, users.path, reader, tmp_path / "ckpt")
    kinds = sorted((r["user_id"], r["_change_type"]) for r in feed)
    assert kinds == [
        (1, "insert"),
        (1, "update_postimage"),
        (1, "update_preimage"),
        (2, "delete"),
        (2, "insert"),
    ]


def test_a_new_native_row_stream_replays_an_appended_table_from_version_0(
    spark, tmp_path: Path
) -> None:
    """A table only appended to is read from version 0, one version a batch, instead of
    from a snapshot listed in Spark jobs (decision 0069); a compacted one keeps Delta's
    snapshot start. Both give every row once."""
    appended = DeltaTarget(str(tmp_path / "appended"), app_id="a:q", engine="native")
    compacted = DeltaTarget(str(tmp_path / "compacted"), app_id="c:q", engine="native")
    for b in range(5):
        df = spark.createDataFrame([Row(id=2 * b), Row(id=2 * b + 1)])
        for target in (appended, compacted):
            write_batch(df, b, target)
        if b == 1:
            delta_engine("native").optimize(spark, compacted.path)

    for target, replayed in ((appended, True), (compacted, False)):
        seen: list[int] = []
        ckpt = tmp_path / f"ckpt-{replayed}"
        stream = read_delta_stream(spark, target.path, engine="native", max_versions_per_trigger=1)
        q = (
            stream.writeStream.foreachBatch(
                lambda b, _i, seen=seen: seen.extend(r.id for r in b.collect())
            )
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(300)
        assert q.exception() is None
        assert sorted(seen) == list(range(10))
        first = json.loads((ckpt / "offsets" / "0").read_text().splitlines()[-1])
        assert first["isStartingVersion"] is (not replayed), first


def test_a_small_merge_evaluates_its_expressions_without_generating_code(
    spark, tmp_path: Path
) -> None:
    """A MERGE of few changes from a small input into a small table runs with Spark's
    code generation off for its own jobs only (`SMALL_MERGE_ROWS`); a session's own
    setting wins, and a larger MERGE keeps code generation."""
    from streams.delta import native

    target = DeltaTarget(str(tmp_path / "t"), mode="upsert", keys=("id",), app_id="a:q")
    small = spark.range(5)
    assert native._estimated_bytes(small) == 5 * 8
    assert native._estimated_bytes(spark.range(10_000_000)) == 80_000_000
    limit, most = native.SMALL_MERGE_ROWS, native.SMALL_MERGE_INPUT_BYTES

    def never() -> int:
        raise AssertionError("asked although an earlier bound already failed")

    assert native._small(limit, lambda: limit, lambda: most)
    assert not native._small(1, lambda: None, never)  # a table without row statistics
    assert not native._small(1, lambda: limit + 1, never)
    assert not native._small(limit + 1, never, never)
    assert not native._small(1, lambda: 0, lambda: most + 1)

    wanted = {
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    }
    session = small.sparkSession
    with native._idempotent_dml(session, 0, target, "{}", small=True):
        assert {k: session.conf.get(k) for k in wanted} == wanted
    assert {k: session.conf.get(k, None) for k in wanted} == dict.fromkeys(wanted)
    with native._idempotent_dml(session, 0, target, "{}", small=False):
        assert {k: session.conf.get(k, None) for k in wanted} == dict.fromkeys(wanted)
    session.conf.set("spark.sql.codegen.wholeStage", "true")
    try:
        with native._idempotent_dml(session, 0, target, "{}", small=True):
            assert session.conf.get("spark.sql.codegen.wholeStage") == "true"
            assert session.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
        assert session.conf.get("spark.sql.codegen.wholeStage") == "true"
    finally:
        session.conf.unset("spark.sql.codegen.wholeStage")


@pytest.mark.parametrize("limit", [0, 10_000])
def test_an_upsert_and_scd2_give_the_same_rows_with_or_without_generated_code(
    spark, tmp_path: Path, monkeypatch, limit: int
) -> None:
    """The native MERGE modes on either side of `SMALL_MERGE_ROWS` (0: every MERGE
    generates code)."""
    from streams.delta import native

    monkeypatch.setattr(native, "SMALL_MERGE_ROWS", limit)
    upsert = DeltaTarget(
        str(tmp_path / "u"), mode="upsert", keys=("id",), app_id="u:q", engine="native"
    )
    history = DeltaTarget(
        str(tmp_path / "h"),
        mode="scd2",
        keys=("id",),
        sequence_by="ts",
        app_id="h:q",
        engine="native",
    )
    batches = [
        [Row(id=1, v="a", ts=1), Row(id=2, v="b", ts=1)],
        [Row(id=1, v="c", ts=2), Row(id=3, v="d", ts=2)],
    ]
    for batch_id, rows in enumerate(batches):
        for target in (upsert, history):
            assert write_batch(spark.createDataFrame(rows), batch_id, target) is not None
    got = spark.read.format("delta").load(upsert.path).select("id", "v").collect()
    assert sorted(map(tuple, got)) == [(1, "c"), (2, "b"), (3, "d")]
    versions = spark.read.format("delta").load(history.path)
    got = versions.select("id", "v", versions.valid_to.isNull(), "is_current").collect()
    assert sorted(map(tuple, got)) == [
        (1, "a", False, False),
        (1, "c", True, True),
        (2, "b", True, True),
        (3, "d", True, True),
    ]


def _user_changes(spark, known_small: bool):
    """A function from rows `(user_id, city, seq, _op)` to a batch of changes; persisted
    and counted when `known_small`, as the writer's general path gives a batch."""

    def batch(rows: list[tuple]):
        df = spark.createDataFrame(rows, "user_id long, city string, seq long, _op string")
        if known_small:
            df = df.persist()
            df.count()
        return df

    return batch


def _user_target(tmp_path: Path) -> DeltaTarget:
    """A native upsert by `user_id`, the later `seq` winning."""
    return DeltaTarget(
        str(tmp_path / "u"),
        mode="upsert",
        keys=("user_id",),
        sequence_by="seq",
        app_id="u:q",
        engine="native",
    )


@pytest.mark.parametrize("known_small", [True, False])
def test_an_upsert_merges_the_same_rows_from_the_driver_or_from_spark(
    spark, tmp_path: Path, known_small: bool
) -> None:
    """A batch known to be small (`SMALL_MERGE_INPUT_BYTES`: persisted, as the writer's
    general path gives it) is deduped once and merged from the driver, its null keys and
    tombstones checked in Arrow; any other stays in Spark frames. Both give the same
    rows: the later sequence wins within and across batches, a delete removes its key
    and keeps older changes of later batches out, and a null key is refused naming it."""
    from streams.delta import DeltaWriteError, native, tombstone_path
    from streams.delta.sink import dedupe_changes

    batch, target = _user_changes(spark, known_small), _user_target(tmp_path)
    first = batch(
        [(1, "paris", 1, "c"), (1, "rome", 3, "u"), (1, "oslo", 2, "u"), (2, "lima", 1, "c")]
    )
    collected = native._collect_few(first, dedupe_changes(first, target))
    assert (collected is not None) is known_small
    assert write_batch(first, 0, target) is not None
    write_batch(batch([(2, None, 5, "d"), (3, "kyiv", 1, "c")]), 1, target)
    write_batch(batch([(2, "quito", 4, "u"), (1, "bern", 4, "u")]), 2, target)
    got = spark.read.format("delta").load(target.path).select("user_id", "city", "seq")
    assert sorted(map(tuple, got.collect())) == [(1, "bern", 4), (3, "kyiv", 1)]
    tombstones = spark.read.format("delta").load(tombstone_path(target.path))
    assert [tuple(r) for r in tombstones.select("user_id", "seq").collect()] == [(2, 5)]
    with pytest.raises(DeltaWriteError, match="user_id"):
        write_batch(batch([(None, "x", 9, "c")]), 3, target)


@pytest.mark.parametrize("known_small", [True, False])
def test_an_upsert_appends_its_first_batch_into_the_table_it_creates(
    spark, tmp_path: Path, known_small: bool
) -> None:
    """The first batch of an upsert goes into the table `_create_empty` has just made:
    an append of its changes other than deletes with Delta's app transaction (a WRITE in
    the table's history, not a MERGE), from the driver or from Spark frames alike. A
    replay is skipped by that transaction, the change feed shows the rows as inserts, a
    delete of the first batch is kept as a tombstone, and later batches are merged."""
    import json

    from delta.tables import DeltaTable as SparkDeltaTable

    from streams.delta import tombstone_path

    batch, target = _user_changes(spark, known_small), _user_target(tmp_path)
    first = [(1, "paris", 1, "c"), (1, "rome", 3, "u"), (2, None, 5, "d"), (3, "kyiv", 1, "c")]
    assert write_batch(batch(first), 0, target) == 1
    assert write_batch(batch(first), 0, target) is None  # a replay
    assert DeltaTable(target.path).transaction_version("u:q") == 0

    def history() -> dict[int, Row]:
        rows = SparkDeltaTable.forPath(spark, target.path).history().collect()
        return {h["version"]: h for h in rows}

    first_commit = history()[1]
    assert first_commit["operation"] == "WRITE"
    assert json.loads(first_commit["userMetadata"])["warehouse.batchId"] == 0
    assert set(history()) == {0, 1}

    assert write_batch(batch([(2, "quito", 4, "u"), (1, "bern", 4, "u")]), 1, target) == 2
    assert history()[2]["operation"] == "MERGE"
    got = spark.read.format("delta").load(target.path).select("user_id", "city", "seq")
    assert sorted(map(tuple, got.collect())) == [(1, "bern", 4), (3, "kyiv", 1)]
    tombstones = spark.read.format("delta").load(tombstone_path(target.path))
    assert [tuple(r) for r in tombstones.select("user_id", "seq").collect()] == [(2, 5)]

    feed = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(target.path)
        .select("user_id", "city", "_change_type", "_commit_version")
    )
    assert sorted(map(tuple, feed.collect())) == [
        (1, "bern", "update_postimage", 2),
        (1, "rome", "insert", 1),
        (1, "rome", "update_preimage", 2),
        (3, "kyiv", "insert", 1),
    ]


SNAPSHOT_ROWS = """
    id long, name string, amount decimal(12,2), at timestamp, day date, live boolean
"""


def _dimension(spark, path: str, properties: dict[str, str] | None = None) -> None:
    """A table delta-spark writes in two versions: its timestamps as Parquet's INT96."""
    import datetime as dt
    from decimal import Decimal

    at = dt.datetime(2026, 11, 29, 3, 0, tzinfo=dt.UTC)
    first = spark.createDataFrame(
        [(1, "a", Decimal("1.50"), at, at.date(), True), (2, None, None, None, None, None)],
        SNAPSHOT_ROWS,
    )
    writer = first.write.format("delta")
    for k, v in (properties or {}).items():
        writer = writer.option(k, v)
    writer.save(path)
    more = spark.createDataFrame([(3, "c", Decimal("-2.25"), at, at.date(), False)], SNAPSHOT_ROWS)
    more.write.format("delta").mode("append").save(path)


def _reads_in_python(frame) -> bool:
    return "warehouse_delta" in frame._jdf.queryExecution().optimizedPlan().toString()


def test_a_small_local_snapshot_is_read_with_delta_rs_as_delta_spark_reads_it(
    spark, tmp_path: Path
) -> None:
    """The static side of a stream-static join on the native engine: a small local table
    is read by one delta-rs task at each execution, with delta-spark's rows and types."""
    path = str(tmp_path / "dim")
    _dimension(spark, path)
    frame = delta_engine("native").read_snapshot(spark, path)
    assert _reads_in_python(frame)
    spark_read = spark.read.format("delta").load(path)
    assert frame.schema == spark_read.schema
    rows = sorted(frame.collect())
    assert rows == sorted(spark_read.collect())
    assert len(rows) == 3

    # the same DataFrame executed again reads the version that is the latest then
    spark.createDataFrame([(4, "d", None, None, None, True)], SNAPSHOT_ROWS).write.format(
        "delta"
    ).mode("append").save(path)
    assert sorted(r["id"] for r in frame.collect()) == [1, 2, 3, 4]


def test_a_snapshot_delta_rs_does_not_read_keeps_sparks_reader(
    spark, tmp_path: Path, monkeypatch
) -> None:
    """A table of a reader feature (column mapping) or larger than `SMALL_SNAPSHOT_BYTES`
    is read by delta-spark's own reader."""
    from streams.delta import native

    mapped = str(tmp_path / "mapped")
    _dimension(
        spark,
        mapped,
        {
            "delta.columnMapping.mode": "name",
            "delta.minReaderVersion": "2",
            "delta.minWriterVersion": "5",
        },
    )
    frame = delta_engine("native").read_snapshot(spark, mapped)
    assert not _reads_in_python(frame)
    assert sorted(r["id"] for r in frame.collect()) == [1, 2, 3]

    plain = str(tmp_path / "plain")
    _dimension(spark, plain)
    monkeypatch.setattr(native, "SMALL_SNAPSHOT_BYTES", 0)
    frame = delta_engine("native").read_snapshot(spark, plain)
    assert not _reads_in_python(frame)
    assert sorted(r["id"] for r in frame.collect()) == [1, 2, 3]
