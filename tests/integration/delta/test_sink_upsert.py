"""Upsert (SCD1) sink: last change per key wins by sequence, deletes, idempotent replays."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import Row

from streams.delta import DeltaTarget, DeltaWriteError, tombstone_path, write_batch
from streams.delta.tables import open_table
from streams.delta.tombstones import read_tombstones
from tests.support.rows import assert_rows

pytestmark = pytest.mark.spark

SCHEMA = "user_id long, city string, seq long, _op string"


def _target(folder: Path | str, engine: str, **kw) -> DeltaTarget:
    return DeltaTarget(
        f"{folder}/users",
        mode="upsert",
        keys=["user_id"],
        app_id="users:q1",
        engine=engine,
        **kw,
    )


def test_insert_update_delete_and_order_within_and_across_batches(
    spark, where: str, read_table, engine: str
) -> None:
    target = _target(where, engine, sequence_by="seq")
    batch0 = [
        (1, "paris", 1, "c"),
        (1, "rome", 3, "u"),  # the newest of key 1 in this batch
        (1, "oslo", 2, "u"),  # older, arrives later: ignored
        (2, "lima", 1, "c"),
        (3, "kyiv", 1, "c"),
        (3, "kyiv", 1, "c"),  # duplicate
        (9, None, 1, "d"),  # delete of a key the table never had
    ]
    assert write_batch(spark.createDataFrame(batch0, SCHEMA), 0, target) is not None
    assert_rows(
        read_table(target.path),
        [
            Row(user_id=1, city="rome", seq=3),
            Row(user_id=2, city="lima", seq=1),
            Row(user_id=3, city="kyiv", seq=1),
        ],
    )
    batch1 = [
        (1, "bern", 2, "u"),  # older than the table's seq 3: ignored
        (2, "quito", 5, "u"),
        (3, None, 2, "d"),
        (4, "baku", 1, "r"),
    ]
    write_batch(spark.createDataFrame(batch1, SCHEMA), 1, target)
    expected = [
        Row(user_id=1, city="rome", seq=3),
        Row(user_id=2, city="quito", seq=5),
        Row(user_id=4, city="baku", seq=1),
    ]
    assert_rows(read_table(target.path), expected)
    # `_op` is consumed, not stored.
    assert [f.name for f in open_table(target.path).schema().fields] == ["user_id", "city", "seq"]
    # Replaying batch 1 (after a crash) changes nothing.
    version = open_table(target.path).version()
    assert write_batch(spark.createDataFrame(batch1, SCHEMA), 1, target) is None
    assert open_table(target.path).version() == version
    assert_rows(read_table(target.path), expected)


def test_a_batch_of_only_stale_changes_still_records_its_transaction(
    spark, tmp_path: Path, read_table, engine: str
) -> None:
    target = _target(tmp_path, engine, sequence_by="seq")
    write_batch(spark.createDataFrame([(1, "rome", 5, "c")], SCHEMA), 0, target)
    write_batch(spark.createDataFrame([(1, "oslo", 4, "u")], SCHEMA), 1, target)
    assert DeltaTable(target.path).transaction_version("users:q1") == 1
    assert_rows(read_table(target.path), [Row(user_id=1, city="rome", seq=5)])


def test_without_sequence_the_later_kafka_offset_wins_and_deleted_flag_deletes(
    spark, tmp_path: Path, read_table, engine: str
) -> None:
    target = _target(tmp_path, engine)
    schema = "user_id long, city string, _offset long, _deleted boolean"
    rows = [(1, "b", 7, False), (1, "a", 3, False), (2, "x", 1, False), (2, None, 2, True)]
    write_batch(spark.createDataFrame(rows, schema), 0, target)
    assert_rows(read_table(target.path), [Row(user_id=1, city="b", _offset=7)])


def test_added_columns_and_partitions_in_upserts(
    spark, tmp_path: Path, read_table, engine: str
) -> None:
    target = _target(tmp_path, engine, sequence_by="seq", partition_by=["city"])
    write_batch(spark.createDataFrame([(1, "rome", 1, "c")], SCHEMA), 0, target)
    more = spark.createDataFrame(
        [(1, "rome", 2, "u", "gold"), (2, "oslo", 1, "c", None)], SCHEMA + ", tier string"
    )
    write_batch(more, 1, target)
    assert DeltaTable(target.path).metadata().partition_columns == ["city"]
    assert_rows(
        read_table(target.path),
        [
            Row(user_id=1, city="rome", seq=2, tier="gold"),
            Row(user_id=2, city="oslo", seq=1, tier=None),
        ],
    )


def test_null_keys_and_missing_keys_are_refused(spark, tmp_path: Path, engine: str) -> None:
    target = _target(tmp_path, engine)
    with pytest.raises(DeltaWriteError, match="key column `user_id` is null"):
        write_batch(spark.createDataFrame([(None, "a", 1, "c")], SCHEMA), 0, target)
    bad = DeltaTarget(str(tmp_path / "u2"), mode="upsert", keys=["id"], app_id="x", engine=engine)
    with pytest.raises(Exception, match="key columns `id` not in the batch"):
        write_batch(spark.createDataFrame([(1, "a", 1, "c")], SCHEMA), 0, bad)


def test_a_deleted_key_stays_deleted_against_older_changes_of_later_batches(
    spark, tmp_path: Path, read_table, engine: str
) -> None:
    target = _target(tmp_path, engine, sequence_by="seq")
    write_batch(
        spark.createDataFrame([(1, "rome", 1, "c"), (2, "lima", 1, "c")], SCHEMA), 0, target
    )
    write_batch(spark.createDataFrame([(1, None, 5, "d"), (3, None, 4, "d")], SCHEMA), 1, target)
    # Older than the deletes, arriving later: key 1 (deleted) and key 3 (a delete of a key
    # the table never held) stay away; key 2 takes its update.
    late = [(1, "oslo", 3, "u"), (3, "bern", 2, "c"), (2, "kyiv", 2, "u")]
    write_batch(spark.createDataFrame(late, SCHEMA), 2, target)
    assert_rows(read_table(target.path), [Row(user_id=2, city="kyiv", seq=2)])
    # The table holds live rows only; the deletes are kept beside it.
    assert_rows(
        read_table(tombstone_path(target.path)).select("user_id", "seq"),
        [Row(user_id=1, seq=5), Row(user_id=3, seq=4)],
    )
    # A change as new as the delete, or newer, brings the key back.
    write_batch(
        spark.createDataFrame([(1, "bern", 5, "c"), (3, "baku", 9, "c")], SCHEMA), 3, target
    )
    expected = [
        Row(user_id=1, city="bern", seq=5),
        Row(user_id=2, city="kyiv", seq=2),
        Row(user_id=3, city="baku", seq=9),
    ]
    assert_rows(read_table(target.path), expected)
    # Replaying batch 2 changes nothing.
    assert write_batch(spark.createDataFrame(late, SCHEMA), 2, target) is None
    assert_rows(read_table(target.path), expected)


def test_tombstones_expire_after_their_retention(
    spark, tmp_path: Path, read_table, engine: str
) -> None:
    target = _target(tmp_path, engine, sequence_by="seq", tombstone_retention=0.001)
    write_batch(spark.createDataFrame([(1, "rome", 1, "c")], SCHEMA), 0, target)
    write_batch(spark.createDataFrame([(1, None, 5, "d")], SCHEMA), 1, target)
    # Long past the retention: the delete is forgotten and the old change wins again.
    write_batch(spark.createDataFrame([(1, "oslo", 3, "u")], SCHEMA), 2, target)
    assert_rows(read_table(target.path), [Row(user_id=1, city="oslo", seq=3)])
    # no longer in force; deleted from the tombstone table at its next compaction
    assert read_tombstones(target, None, now=dt.datetime.now(dt.UTC)) is None
