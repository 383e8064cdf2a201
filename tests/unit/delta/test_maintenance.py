"""Status and clean-up helpers on real Delta tables written by delta-rs (no Spark)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from streams.delta import (
    DeltaSchemaError,
    DeltaTableNotFoundError,
    DeltaTarget,
    commit_properties,
    recorded_offsets,
    remove_orphans,
    table_info,
)
from streams.delta.arrow import read_table
from streams.delta.schema import new_columns
from streams.delta.target import newest_recorded


def _write(path: Path, rows: list[int], batch: int, info: dict | None) -> None:
    target = DeltaTarget(str(path), app_id="t:q")
    write_deltalake(
        str(path),
        pa.table({"x": rows}),
        mode="append",
        commit_properties=commit_properties(target, batch, info),
    )


def test_recorded_offsets_skip_commits_without_them(tmp_path: Path) -> None:
    _write(tmp_path, [1, 2], 0, {"warehouse.sourceOffsets": {"t": {"0": 2}}})
    _write(tmp_path, [3], 1, {"warehouse.sourceOffsets": {"t": {"0": 3}}, "warehouse.table": "a"})
    _write(tmp_path, [4], 2, None)
    assert recorded_offsets(tmp_path) == {"t": {"0": 3}}
    assert recorded_offsets(tmp_path, table="a") == {"t": {"0": 3}}
    assert recorded_offsets(tmp_path, table="b") == {"t": {"0": 2}}


def test_recorded_offsets_are_found_past_the_first_window_of_history(tmp_path: Path) -> None:
    """The offsets of a commit 70 versions back: beyond the 64 newest commits read first."""
    _write(tmp_path, [0], 0, {"warehouse.sourceOffsets": {"t": {"0": 1}}})
    for b in range(1, 71):
        _write(tmp_path, [b], b, None)
    assert recorded_offsets(tmp_path) == {"t": {"0": 1}}
    assert recorded_offsets(tmp_path, table="other") == {"t": {"0": 1}}  # no table recorded


def test_newest_recorded_reads_newest_first_within_the_windows(tmp_path: Path) -> None:
    for b in range(12):
        _write(tmp_path, [b], b, None)
    dt = DeltaTable(str(tmp_path))
    batches = [info["warehouse.batchId"] for info in newest_recorded(dt, (3, 10))]
    assert [int(b) for b in batches] == list(range(11, 1, -1))  # ten commits, no repeats
    everything = [int(i["warehouse.batchId"]) for i in newest_recorded(dt, (5, 100, 1000))]
    assert everything == list(range(11, -1, -1))


def test_table_info_counts_rows_from_stats(tmp_path: Path) -> None:
    _write(tmp_path, [1, 2], 0, None)
    _write(tmp_path, [3], 1, {"warehouse.sourceOffsets": {"t": {"0": 3}}, "warehouse.batchId": 1})
    info = table_info(tmp_path)
    assert (info["version"], info["rows"], info["files"]) == (1, 3, 2)
    assert info["last_commit"]["batch_id"] == 1
    assert info["last_commit"]["offsets"] == {"t": {"0": 3}}
    assert info["last_commit"]["operation"] == "WRITE"


def test_missing_table_says_to_run_it_first(tmp_path: Path) -> None:
    with pytest.raises(DeltaTableNotFoundError, match="run the table's query first"):
        table_info(tmp_path / "nope")


def test_remove_orphans_deletes_only_old_unreferenced_files(tmp_path: Path) -> None:
    _write(tmp_path, [1, 2], 0, None)
    old, fresh = tmp_path / "part-old.parquet", tmp_path / "part-fresh.parquet"
    for f in (old, fresh):
        f.write_bytes(b"PAR1")
    past = time.time() - 7200
    os.utime(old, (past, past))
    for f in DeltaTable(str(tmp_path)).file_uris():
        os.utime(f.removeprefix("file://"), (past, past))
    assert remove_orphans(tmp_path, older_than_hours=1, dry_run=True) == ["part-old.parquet"]
    assert old.exists()
    assert remove_orphans(tmp_path, older_than_hours=1) == ["part-old.parquet"]
    assert not old.exists() and fresh.exists()
    assert read_table(str(tmp_path)).num_rows == 2


def test_remove_orphans_deletes_old_staging_directories(tmp_path: Path) -> None:
    """A killed Spark-written attempt leaves `_warehouse_staging/<attempt>/`; it goes
    once older than the grace period, a running attempt's stays."""
    _write(tmp_path, [1], 0, None)
    old, fresh = (tmp_path / "_warehouse_staging" / n for n in ("old", "fresh"))
    for d in (old, fresh):
        (d / "_temporary" / "0").mkdir(parents=True)
        (d / "_temporary" / "0" / "part-0.parquet").write_bytes(b"PAR1")
    past = time.time() - 7200
    os.utime(old, (past, past))
    assert remove_orphans(tmp_path, older_than_hours=1) == ["_warehouse_staging/old/"]
    assert not old.exists() and fresh.exists()
    assert read_table(str(tmp_path)).num_rows == 1


def test_new_columns_are_added_but_type_changes_refused(tmp_path: Path) -> None:
    _write(tmp_path, [1], 0, None)
    dt = DeltaTable(str(tmp_path))
    added = new_columns(dt, pa.schema([("x", pa.int64()), ("y", pa.string())]), path="p")
    assert [f.name for f in added] == ["y"]
    with pytest.raises(DeltaSchemaError) as info:
        new_columns(dt, pa.schema([("x", pa.string())]), path="/t/p")
    assert info.value.column == "x" and "`/t/p`" in str(info.value)
    assert "cast the column back" in str(info.value)
