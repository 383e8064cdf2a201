"""Append sink: exactly-once per (app_id, batch_id), commit info, schema evolution,
partitioning, stats, maintenance. Real Spark, real Delta tables in tmp_path."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import Row

import streams.storage as storage
from streams.delta import (
    DeltaSchemaError,
    DeltaTarget,
    committed,
    delta_engine,
    native_delta_available,
    table_info,
    write_batch,
)
from streams.delta.tables import open_table
from tests.support.rows import assert_rows

pytestmark = pytest.mark.spark


def _orders(spark, ids: range, day: str = "2024-01-01"):
    return spark.createDataFrame(
        [(i, f"user{i % 3}", float(i) * 1.5, day) for i in ids],
        "order_id long, user_id string, amount double, event_date string",
    )


def test_replaying_a_batch_is_a_no_op(spark, where: str, read_table) -> None:
    target = DeltaTarget(f"{where}/t", app_id="orders:q1")
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
    dt_ = open_table(target.path)
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
    with pytest.raises(DeltaSchemaError, match="partitioned by") as info:
        write_batch(
            _orders(spark, range(1)),
            2,
            DeltaTarget(target.path, app_id="a:q", partition_by=["user_id"]),
        )
    assert info.value.partitioning == (["event_date"], ["user_id"])


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


@pytest.mark.parametrize("mode", ["append", "upsert"])
def test_type_change_is_refused_with_the_table_path(
    spark, tmp_path: Path, engine: str, mode: str
) -> None:
    """Both engines refuse a batch whose column changed type, naming the column and both
    types: delta-spark alone says "Failed to merge fields 'id' and 'id'" for an append,
    and its MERGE casts the new type to the old one (failing on `x`)."""
    keys = ["name"] if mode == "upsert" else []
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q", engine=engine, mode=mode, keys=keys)
    write_batch(spark.createDataFrame([(1, "a")], "id long, name string"), 0, target)
    before = DeltaTable(target.path).version()
    with pytest.raises(DeltaSchemaError) as info:
        write_batch(spark.createDataFrame([("x", "a")], "id string, name string"), 1, target)
    assert info.value.column == "id" and target.path in str(info.value)
    assert "`id` has type `long` in the table but `string` in the batch" in str(info.value)
    assert info.value.types == ("long", "string")
    with pytest.raises(DeltaSchemaError, match="partitioned by") as info:
        write_batch(
            spark.createDataFrame([(2, "b")], "id long, name string"),
            1,
            replace(target, partition_by=["name"]),
        )
    assert info.value.partitioning == ([], ["name"])
    assert DeltaTable(target.path).version() == before


def test_timestamps_round_trip_in_utc(spark, tmp_path: Path, read_table) -> None:
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q")
    ts = dt.datetime(2024, 1, 1, 10, 30, 0, 123456)
    write_batch(spark.createDataFrame([(1, ts)], "id long, ts timestamp"), 0, target)
    assert_rows(read_table(target.path), [Row(id=1, ts=ts)])


def test_optimize_and_vacuum_keep_the_rows(spark, where: str, read_table, engine) -> None:
    """Each engine compacts and vacuums with its own library (delta-rs, delta-spark's
    OPTIMIZE and VACUUM); rows stay, and so does the writer's record of its last batch:
    a replay of it is still recognised."""
    target = DeltaTarget(f"{where}/t", app_id="a:q", engine=engine)
    for b in range(4):
        write_batch(_orders(spark, range(b * 10, b * 10 + 10)), b, target)
    files_before = table_info(target.path)["files"]
    assert files_before >= 4
    metrics = delta_engine(engine).optimize(spark, target.path)
    assert metrics["numFilesRemoved"] == files_before and table_info(target.path)["files"] == 1
    assert open_table(target.path).history(1)[0]["operation"] == "OPTIMIZE"
    deleted = delta_engine(engine).vacuum(spark, target.path, 0, force=True)
    assert len(deleted) == files_before
    assert table_info(target.path)["rows"] == 40
    assert_rows(read_table(target.path).select("order_id"), [Row(order_id=i) for i in range(40)])
    assert committed(target, 3) and not committed(target, 4)
    assert write_batch(_orders(spark, range(30, 40)), 3, target) is None
    assert delta_engine(engine).vacuum(spark, target.path, 0, force=True) == []


def _removed_hours_ago(spark, path: str, hours: float) -> None:
    """Make every file the table's log removes look removed `hours` ago: the remove
    actions' `deletionTimestamp` and the files' modification times (VACUUM reads both).
    delta-spark's cached state of the table is dropped, as it was read before the edit."""
    import json
    import os
    import time

    then = time.time() - hours * 3600
    for commit in sorted((Path(path) / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line]
        for action in actions:
            if "remove" in action:
                action["remove"]["deletionTimestamp"] = int(then * 1000)
                os.utime(Path(path) / action["remove"]["path"], (then, then))
        commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
        # Hadoop's checksum of the file as delta-spark wrote it (a mismatch fails the read).
        (commit.parent / f".{commit.name}.crc").unlink(missing_ok=True)
    if native_delta_available(spark):
        spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()


def test_vacuum_keeps_the_retention_it_is_given(spark, tmp_path: Path, engine) -> None:
    """On both engines `retention_hours` is the caller's: files removed two hours ago stay
    under a 3-hour retention and go under a 1-hour one, forced below Delta's minimum.
    (delta-spark 4.4 ignores a VACUUM's retention other than 0 unless told not to, and
    keeps 7 days.) Not forced, Delta's own check refuses a retention below its minimum."""
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q", engine=engine)
    for b in range(3):
        write_batch(_orders(spark, range(b * 10, b * 10 + 10)), b, target)
    files_before = table_info(target.path)["files"]
    delta_engine(engine).optimize(spark, target.path)
    _removed_hours_ago(spark, target.path, 2)

    with pytest.raises(Exception, match="(?i)retention"):
        delta_engine(engine).vacuum(spark, target.path, 1)
    assert delta_engine(engine).vacuum(spark, target.path, 3, force=True) == []
    deleted = delta_engine(engine).vacuum(spark, target.path, 1, force=True)
    assert len(deleted) == files_before
    assert table_info(target.path)["rows"] == 30


def test_optimize_every_compacts_automatically(spark, tmp_path: Path, engine) -> None:
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q", optimize_every=3, engine=engine)
    for b in range(4):
        write_batch(_orders(spark, range(b * 5, b * 5 + 5)), b, target)
    ops = [c["operation"] for c in reversed(DeltaTable(target.path).history())]
    # delta-rs names a table's first commit CREATE TABLE, delta-spark a first append WRITE.
    first = "CREATE TABLE" if engine == "python" else "WRITE"
    assert ops == [first, "WRITE", "WRITE", "WRITE", "OPTIMIZE"]
    assert table_info(target.path)["rows"] == 20 and table_info(target.path)["files"] == 1


_TYPED = (
    "id long, small smallint, name string, note string, amount double, score double, "
    "price decimal(10,2), ok boolean, day date, ts timestamp, raw binary, "
    "headers array<struct<key: string, value: binary>>"
)


def _typed_rows() -> list[tuple]:
    return [
        (1, 3, "bob", "short", 1.5, 2.5, None, True, dt.date(2024, 1, 2),
         dt.datetime(2024, 1, 1, 10, 0, 0, 1500), b"x", None),
        (2, None, None, "n" * 40, float("nan"), 0.5, None, None, dt.date(2024, 1, 1),
         dt.datetime(2024, 1, 1, 9, 0, 0), None, [("k", b"v")]),
        (3, -7, "al", None, None, None, None, False, None, None, b"", None),
    ]  # fmt: skip


def test_spark_writer_stats_match_the_arrow_writer(spark, tmp_path: Path, read_table) -> None:
    """Appends go through Spark's Parquet writer (stats read back from the footers); the
    stats must be exactly what the Arrow writer (`mapInArrow`) computes from the rows."""
    from streams.delta.files import FILES_SCHEMA, file_writer
    from streams.delta.schema import arrow_schema

    df = spark.createDataFrame(_typed_rows(), _TYPED).repartition(1)
    target = DeltaTarget(str(tmp_path / "fast"), app_id="a:q")
    write_batch(df, 0, target)
    leftovers = [p.name for p in Path(target.path).iterdir() if p.name != "_delta_log"]
    assert all(n.endswith(".parquet") and not n.startswith((".", "_")) for n in leftovers)
    log = (Path(target.path) / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    (got,) = [json.loads(a["add"]["stats"]) for a in map(json.loads, log) if "add" in a]
    assert got == {
        "numRecords": 3,
        "minValues": {"id": 1, "small": -7, "name": "al", "score": 0.5,
                      "day": "2024-01-01", "ts": "2024-01-01T09:00:00.000Z"},
        "maxValues": {"id": 3, "small": 3, "name": "bob", "score": 2.5,
                      "day": "2024-01-02", "ts": "2024-01-01T10:00:00.002Z"},
        "nullCount": {"id": 0, "small": 1, "name": 1, "note": 1, "amount": 1, "score": 1,
                      "price": 3, "ok": 1, "day": 1, "ts": 1, "raw": 1},
    }  # fmt: skip
    arrow = df.mapInArrow(
        file_writer(str(tmp_path / "arrow"), arrow_schema(df.schema), []), FILES_SCHEMA
    ).collect()
    assert [json.loads(r["stats"]) for r in arrow] == [got]
    rows = read_table(target.path).orderBy("id").collect()
    assert [r.headers for r in rows] == [None, [Row(key="k", value=bytearray(b"v"))], None]
    assert rows[0].ts == dt.datetime(2024, 1, 1, 10, 0, 0, 1500)


def test_arrow_writer_reads_back_a_row_group_without_bounds(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table the Arrow writer writes as two row groups, the first's max too long for the
    footer's statistics: on a local disk and on S3 the file is read back for the bounds."""
    from streams.delta import files

    monkeypatch.setattr(files, "ROW_GROUP_ROWS", 3)
    long = "c" * (files.WRITER_STATS_MAX + 1)
    batch = pa.record_batch({"s": ["b", long, "b", "d"], "n": [3, 1, None, 2]})
    [out] = files.file_writer(f"{where}/t", batch.schema, [])(iter([batch]))
    [row] = out.to_pylist()
    assert json.loads(row["stats"]) == {
        "numRecords": 4,
        "minValues": {"s": "b", "n": 1},
        "maxValues": {"s": "d", "n": 3},
        "nullCount": {"s": 0, "n": 1},
    }
    assert storage.size(f"{where}/t/{row['path']}") == row["size"]


def test_timestamp_partitions_take_the_arrow_writer(spark, tmp_path: Path, read_table) -> None:
    """Spark formats timestamp directory names its own way; such tables keep the Delta
    protocol's partition values through the Arrow writer."""
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q", partition_by=["hour"])
    ts = dt.datetime(2024, 1, 1, 10, 0)
    write_batch(spark.createDataFrame([(1, ts), (2, None)], "id long, hour timestamp"), 0, target)
    log = (Path(target.path) / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    values = [a["add"]["partitionValues"] for a in map(json.loads, log) if "add" in a]
    assert sorted(values, key=str) == [{"hour": "2024-01-01 10:00:00.000000"}, {"hour": None}]
    assert_rows(read_table(target.path), [Row(id=1, hour=ts), Row(id=2, hour=None)])


def test_string_partition_values_with_special_characters(spark, tmp_path: Path, read_table) -> None:
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q", partition_by=["city", "n"])
    data = [(1, "São Paulo/Centro", 1), (2, "a=b%c d", None), (3, None, 2)]
    write_batch(spark.createDataFrame(data, "id long, city string, n int"), 0, target)
    log = (Path(target.path) / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    values = [a["add"]["partitionValues"] for a in map(json.loads, log) if "add" in a]
    expected = [
        {"city": "São Paulo/Centro", "n": "1"},
        {"city": "a=b%c d", "n": None},
        {"city": None, "n": "2"},
    ]
    assert sorted(values, key=lambda v: (str(v["city"]), str(v["n"]))) == sorted(
        expected, key=lambda v: (str(v["city"]), str(v["n"]))
    )
    assert_rows(
        read_table(target.path),
        [Row(id=i, city=c, n=n) for i, c, n in data],
    )


def _column_chunks(root: str) -> dict[str, set[tuple[str, bool]]]:
    """{column: {(compression, has a dictionary page)}} over every data file of the table."""
    import pyarrow.parquet as pq

    out: dict[str, set[tuple[str, bool]]] = {}
    for f in DeltaTable(root).file_uris():
        meta = pq.read_metadata(f)
        for g in range(meta.num_row_groups):
            for i in range(meta.num_columns):
                c = meta.row_group(g).column(i)
                out.setdefault(c.path_in_schema, set()).add(
                    (c.compression, c.dictionary_page_offset is not None)
                )
    return out


@pytest.mark.parametrize("writer", ["spark", "arrow", "native"])
def test_files_are_zstd_and_unique_columns_have_no_dictionary(
    spark, tmp_path: Path, read_table, writer: str, request
) -> None:
    """Every writer (the Python engine's Spark writer for plain partition types and Arrow
    writer for timestamp partitions, delta-spark's on the native engine) compresses with
    zstd and writes `unique_columns` without a dictionary (the Arrow writer gives one to
    text columns only); the native engine's settings do not outlive the write."""
    if writer == "native":
        request.getfixturevalue("native_jars")
    df = spark.createDataFrame(
        [(i, i % 3, dt.datetime(2024, 1, 1)) for i in range(50)],
        "_offset long, n long, hour timestamp",
    )
    target = DeltaTarget(
        str(tmp_path / "t"),
        app_id="a:q",
        partition_by=["hour"] if writer == "arrow" else [],
        unique_columns=["_offset", "not_a_column"],
        engine="native" if writer == "native" else "python",
    )
    write_batch(df, 0, target)
    chunks = _column_chunks(target.path)
    assert chunks["_offset"] == {("ZSTD", False)}
    # Spark's writers give other columns a dictionary; the Arrow writer only text ones.
    assert chunks["n"] == {("ZSTD", writer != "arrow")}
    assert read_table(target.path).count() == 50
    assert spark.conf.get("parquet.enable.dictionary#_offset", None) is None


def test_a_codec_set_in_the_session_is_kept(spark, tmp_path: Path, engine) -> None:
    spark.conf.set("spark.sql.parquet.compression.codec", "snappy")
    try:
        target = DeltaTarget(str(tmp_path / "t"), app_id="a:q", engine=engine)
        write_batch(_orders(spark, range(5)), 0, target)
    finally:
        spark.conf.unset("spark.sql.parquet.compression.codec")
    assert {c for cs in _column_chunks(target.path).values() for c, _ in cs} == {"SNAPPY"}
