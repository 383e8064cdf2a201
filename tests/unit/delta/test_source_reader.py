"""The Delta stream reader's offsets and planning, driven directly (no JVM needed):
the reader is plain Python that Spark calls; here the test calls it the same way."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles
from pyspark.sql.types import StructType

from streams.delta import DeltaReadError
from streams.delta.source import (
    TABLE_REPLACED,
    DeltaStreamReader,
    _table_schema,
    waits_for_commits,
)


def _append(path: Path, ids: list[int]) -> None:
    write_deltalake(str(path), pa.table({"id": pa.array(ids, pa.int64())}), mode="append")


def _reader(path: Path, read: str = "append", max_versions: int | None = None):
    return DeltaStreamReader(str(path), read, max_versions, _table_schema(str(path), read))


def _rows(reader: DeltaStreamReader, start: int, end: int) -> list[int]:
    parts = reader.partitions({"version": start}, {"version": end})
    return sorted(x for p in parts for b in reader.read(p) for x in b.column("id").to_pylist())


def test_offsets_advance_by_the_limit_and_stop_at_the_available_now_target(
    tmp_path: Path,
) -> None:
    for v in range(4):
        _append(tmp_path, [v])
    r = _reader(tmp_path, max_versions=2)
    table = str(DeltaTable(str(tmp_path)).metadata().id)
    assert r.initialOffset() == {"version": -1, "table": table}
    assert r.getDefaultReadLimit() == ReadMaxFiles(2)
    assert r.latestOffset({"version": -1}, ReadMaxFiles(2)) == {"version": 1, "table": table}
    assert r.latestOffset({"version": 1, "table": table}, ReadAllAvailable()) == {
        "version": 3,
        "table": table,
    }
    r.prepareForTriggerAvailableNow()
    _append(tmp_path, [4])  # after the AvailableNow target: not this run's business
    assert r.latestOffset({"version": 3}, ReadAllAvailable()) == {"version": 3, "table": table}
    assert _rows(r, -1, 1) == [0, 1] and _rows(r, 1, 3) == [2, 3] and _rows(r, 3, 3) == []


def test_a_position_in_a_table_since_replaced_is_refused(tmp_path: Path) -> None:
    """A table deleted and written again at the path (what `warehouse reset` and a rerun
    do) is a new table: a position in the old one names nothing in it."""
    for v in range(3):
        _append(tmp_path, [v])
    r = _reader(tmp_path)
    old = r.latestOffset(r.initialOffset(), ReadAllAvailable())
    assert old["version"] == 2
    shutil.rmtree(tmp_path)
    _append(tmp_path, [7])
    with pytest.raises(DeltaReadError, match=TABLE_REPLACED) as info:
        r.latestOffset(old, ReadAllAvailable())
    assert info.value.version == 2 and old["table"] in str(info.value)
    assert r.latestOffset({"version": 2}, ReadAllAvailable())["version"] == 2  # not recorded


def test_append_skips_compaction_but_refuses_rewrites(tmp_path: Path) -> None:
    _append(tmp_path, [1])
    _append(tmp_path, [2])
    DeltaTable(str(tmp_path)).optimize.compact()  # version 2: dataChange=false
    r = _reader(tmp_path)
    assert _rows(r, -1, 2) == [1, 2]
    (
        DeltaTable(str(tmp_path))
        .merge(pa.table({"id": pa.array([2], pa.int64())}), "t.id = s.id", "s", "t")
        .when_matched_delete()
        .execute()
    )
    with pytest.raises(DeltaReadError, match="Use `read: changes`") as info:
        r.partitions({"version": 2}, {"version": 3})
    assert info.value.version == 3


def test_changes_read_empty_and_schema_only_versions(tmp_path: Path) -> None:
    write_deltalake(
        str(tmp_path),
        pa.table({"id": pa.array([1], pa.int64())}),
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    dt = DeltaTable(str(tmp_path))
    dt.create_write_transaction([], "append", dt.schema())  # an empty (txn-only) commit
    _append(tmp_path, [2])
    r = _reader(tmp_path, read="changes")
    parts = r.partitions({"version": -1}, {"version": 2})
    got = [row for p in parts for b in r.read(p) for row in b.to_pylist()]
    assert [(x["id"], x["_change_type"], x["_commit_version"]) for x in got] == [
        (1, "insert", 0),
        (2, "insert", 2),
    ]


def test_new_columns_after_planning_are_dropped_missing_ones_are_null(tmp_path: Path) -> None:
    write_deltalake(str(tmp_path), pa.table({"id": [1], "a": ["x"]}))
    r = _reader(tmp_path)
    write_deltalake(
        str(tmp_path), pa.table({"id": [2], "b": ["y"]}), mode="append", schema_mode="merge"
    )
    parts = r.partitions({"version": -1}, {"version": 1})
    got = sorted((row["id"], row["a"]) for p in parts for b in r.read(p) for row in b.to_pylist())
    assert got == [(1, "x"), (2, None)]


def test_the_latest_offset_reported_is_the_one_the_trigger_planned_from(tmp_path: Path) -> None:
    """Spark asks a source `reportLatestOffset` right after `latestOffset`, at every
    trigger (an idle query's too): the answer is the version that call saw, without
    reading the table again; asked again without a `latestOffset` between, the reader
    reads the table."""
    _append(tmp_path, [0])
    r = _reader(tmp_path)
    table = str(DeltaTable(str(tmp_path)).metadata().id)
    assert r.latestOffset(r.initialOffset(), ReadAllAvailable()) == {"version": 0, "table": table}
    _append(tmp_path, [1])
    assert r.reportLatestOffset() == {"version": 0, "table": table}
    assert r.reportLatestOffset() == {"version": 1, "table": table}


def _latest_in_thread(reader: DeltaStreamReader, start: dict) -> tuple[threading.Thread, list]:
    answer: list = []
    t = threading.Thread(
        target=lambda: answer.append(reader.latestOffset(start, ReadAllAvailable())), daemon=True
    )
    t.start()
    return t, answer


def test_a_waiting_trigger_answers_with_the_commit_that_lands_in_its_wait(tmp_path: Path) -> None:
    """With nothing new, a trigger waits for the next commit file and answers with that
    version; without a wait the same trigger answers with nothing new."""
    _append(tmp_path, [0])
    table = str(DeltaTable(str(tmp_path)).metadata().id)
    start = {"version": 0, "table": table}
    assert _reader(tmp_path).latestOffset(start, ReadAllAvailable())["version"] == 0

    waiting = DeltaStreamReader(
        str(tmp_path), "append", None, _table_schema(str(tmp_path), "append"), commit_wait=600
    )
    t, answer = _latest_in_thread(waiting, start)
    time.sleep(0.3)  # the trigger is waiting: nothing after version 0 yet
    assert t.is_alive() and answer == []
    _append(tmp_path, [1])
    t.join(timeout=60)
    assert answer == [{"version": 1, "table": table}]
    assert waiting.reportLatestOffset() == {"version": 1, "table": table}
    assert _rows(waiting, 0, 1) == [1]

    # A commit already there: no wait at all (a wait of 600 s would hold the join).
    _append(tmp_path, [2])
    t, answer = _latest_in_thread(waiting, {"version": 1, "table": table})
    t.join(timeout=60)
    assert answer == [{"version": 2, "table": table}]


def test_a_wait_ends_with_nothing_new_and_available_now_never_waits(tmp_path: Path) -> None:
    _append(tmp_path, [0])
    schema = _table_schema(str(tmp_path), "append")
    short = DeltaStreamReader(str(tmp_path), "append", None, schema, commit_wait=0.2)
    assert short.latestOffset({"version": 0}, ReadAllAvailable())["version"] == 0

    once = DeltaStreamReader(str(tmp_path), "append", None, schema, commit_wait=600)
    once.prepareForTriggerAvailableNow()
    t, answer = _latest_in_thread(once, {"version": 0})
    t.join(timeout=60)
    assert [a["version"] for a in answer] == [0]


def test_only_a_local_log_is_waited_for() -> None:
    assert waits_for_commits("/tmp/wh/ods_orders")
    assert waits_for_commits("file:///tmp/wh/ods_orders")
    assert not waits_for_commits("s3a://bucket/wh/ods_orders")
    assert not waits_for_commits("abfss://c@acct.dfs.core.windows.net/wh/ods_orders")
    reader = DeltaStreamReader("s3a://bucket/wh/t", "append", None, StructType([]), commit_wait=600)
    assert reader._log is None
