"""An upsert batch's last change per key: on the driver (`last_change_per_key`) as in
Spark (`dedupe_changes`), and the python engine's upsert of a batch said to hold one
change per key."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import Row

from streams.delta import DeltaTarget, write_batch
from streams.delta.changes import flagged, last_change_per_key
from streams.delta.sink import dedupe_changes
from tests.support.rows import assert_rows

pytestmark = pytest.mark.spark

SCHEMA = "k1 long, k2 string, seq long, _offset long, value string, _op string"
CHANGES = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.sampled_from(["a", "b"]),
        st.one_of(st.none(), st.integers(0, 3)),
        st.one_of(st.none(), st.integers(0, 3)),
        st.text(max_size=3),
        st.sampled_from(["c", "u", "d", None]),
    ),
    min_size=1,
    max_size=30,
)


def _target(path: Path, *, sequence_by: str | None, engine: str = "python", **kw) -> DeltaTarget:
    return DeltaTarget(
        str(path),
        mode="upsert",
        keys=["k1", "k2"],
        sequence_by=sequence_by,
        app_id="t:q",
        engine=engine,
        **kw,
    )


def _sorted(table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=CHANGES, sequence_by=st.sampled_from([None, "seq"]), partitions=st.integers(1, 3))
def test_the_driver_keeps_the_change_spark_keeps(
    spark, tmp_path: Path, rows, sequence_by, partitions
) -> None:
    """Ties on the sequence and the offset, nulls in both, deletes, and a batch spread over
    several partitions (arrival is partition by partition)."""
    df = spark.createDataFrame(rows, SCHEMA).repartition(partitions)
    df = df.sortWithinPartitions("value")  # any arrival order, the same for both
    df.persist()
    try:
        target = _target(tmp_path / "t", sequence_by=sequence_by)
        expected = dedupe_changes(df, target).toArrow()
        got = last_change_per_key(flagged(df, target).toArrow(), target)
        assert got.column_names == expected.column_names
        assert _sorted(got) == _sorted(expected)
    finally:
        df.unpersist()


def test_a_batch_said_to_hold_one_change_per_key_is_checked(
    spark, tmp_path: Path, read_table, engine: str
) -> None:
    """Such a batch is collected as it is (the python engine's; on the native engine, a
    batch known to be small); one that repeats a key anyway is deduped on the driver,
    and the table is what the deduping path gives."""
    rows = [
        (1, "a", 1, 10, "old", "c"),
        (1, "a", 2, 11, "new", "u"),  # the later sequence wins
        (2, "b", None, 12, "x", "c"),
        (2, "b", 1, 13, "gone", "d"),  # a delete of a key the table does not have
        (3, "a", 5, 14, "kept", "c"),
    ]
    said, checked = (
        _target(tmp_path / name, sequence_by="seq", engine=engine, one_change_per_key=flag)
        for name, flag in (("said", True), ("deduped", False))
    )
    for target in (said, checked):
        assert write_batch(spark.createDataFrame(rows, SCHEMA), 0, target) is not None
        write_batch(spark.createDataFrame([(3, "a", 6, 15, "later", "u")], SCHEMA), 1, target)
    expected = [
        Row(k1=1, k2="a", seq=2, _offset=11, value="new"),
        Row(k1=3, k2="a", seq=6, _offset=15, value="later"),
    ]
    assert_rows(read_table(checked.path), expected)
    assert_rows(read_table(said.path), expected)
