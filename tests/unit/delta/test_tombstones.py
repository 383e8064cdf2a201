"""Tombstones of an upsert sink: recorded per key at the greatest delete, idempotent,
expired after the retention, and filtering out older changes (delta-rs, no Spark)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from streams.delta import DeltaTarget, tombstone_path
from streams.delta.tombstones import keep_after_tombstones, record_tombstones

T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("seq", pa.int64())])


def _target(tmp_path: Path, retention: float = 3600.0) -> DeltaTarget:
    return DeltaTarget(
        str(tmp_path / "users"),
        mode="upsert",
        keys=["id"],
        sequence_by="seq",
        app_id="users:q",
        tombstone_retention=retention,
    )


def _rows(*pairs: tuple[int, int | None]) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "seq": s} for i, s in pairs], schema=SCHEMA)


def _kept(tombs: pa.Table | None) -> dict[int, int]:
    return {} if tombs is None else dict(zip(*tombs.to_pydict().values(), strict=True))


def test_no_delete_and_no_tombstones_writes_nothing(tmp_path: Path) -> None:
    target = _target(tmp_path)
    assert record_tombstones(_rows(), target, now=T0) is None
    assert not Path(tombstone_path(target.path)).exists()


def test_a_tombstone_moves_only_forward_and_rewriting_it_is_a_no_op(tmp_path: Path) -> None:
    target = _target(tmp_path)
    assert _kept(record_tombstones(_rows((1, 5), (2, 3), (3, None)), target, now=T0)) == {
        1: 5,
        2: 3,
    }
    version = DeltaTable(tombstone_path(target.path)).version()
    later = T0 + dt.timedelta(minutes=1)
    # An older delete of key 1 and the same delete of key 2 again (a replay): no change.
    assert _kept(record_tombstones(_rows((1, 4), (2, 3)), target, now=later)) == {1: 5, 2: 3}
    assert DeltaTable(tombstone_path(target.path)).version() == version
    assert _kept(record_tombstones(_rows((2, 8)), target, now=later)) == {1: 5, 2: 8}


def test_tombstones_expire_after_the_retention_from_when_they_were_recorded(
    tmp_path: Path,
) -> None:
    target = _target(tmp_path, retention=3600.0)
    record_tombstones(_rows((1, 5)), target, now=T0)
    record_tombstones(_rows((2, 5)), target, now=T0 + dt.timedelta(minutes=30))
    kept = record_tombstones(_rows(), target, now=T0 + dt.timedelta(minutes=61))
    assert _kept(kept) == {2: 5}
    assert record_tombstones(_rows(), target, now=T0 + dt.timedelta(hours=2)) is None


def test_changes_older_than_their_keys_tombstone_are_dropped(tmp_path: Path) -> None:
    target = _target(tmp_path)
    tombs = _rows((1, 5), (2, 5))
    changes = pa.Table.from_pylist(
        [
            {"id": 1, "seq": 4, "city": "old"},  # older than the delete: dropped
            {"id": 2, "seq": 5, "city": "tie"},  # as new as the delete: kept
            {"id": 3, "seq": 1, "city": "other"},  # no tombstone: kept
            {"id": 1, "seq": None, "city": "unordered"},  # no sequence vs a delete: dropped
        ]
    )
    kept = keep_after_tombstones(changes, tombs, target)
    assert kept.column("city").to_pylist() == ["tie", "other"]
    assert keep_after_tombstones(changes, None, target) is changes


def _files(path: str) -> set[str]:
    return {p.name for p in Path(path).glob("*.parquet")}


def test_a_batch_reads_only_the_tombstone_files_that_may_hold_its_keys(tmp_path: Path) -> None:
    """Tombstones recorded by three batches lie in three files with disjoint keys. A
    batch touching keys of one file reads that file only: the others may be gone."""
    target = _target(tmp_path)
    path = tombstone_path(target.path)
    files = []
    for first in (0, 100, 200):
        before = _files(path) if Path(path).exists() else set()
        record_tombstones(_rows(*[(i, 5) for i in range(first, first + 100)]), target, now=T0)
        files.append(_files(path) - before)
    for name in files[0] | files[2]:  # what keys 0..99 and 200..299 are in
        (Path(path) / name).unlink()
    touched = _rows((150, 9), (151, 2), (999, 1))
    kept = record_tombstones(_rows(), target, touched=touched, now=T0)
    assert _kept(kept) == {150: 5, 151: 5}


def test_the_tombstone_table_is_compacted_and_vacuumed(tmp_path: Path) -> None:
    """Every `COMPACT_EVERY` versions the expired tombstones are deleted, the rest
    compacted into one file and the files they replaced vacuumed: the folder stays
    small however many batches deleted keys. In between, an expired tombstone is only
    left out of what is read."""
    from streams.delta.tombstones import COMPACT_EVERY, maintain_tombstones

    target = _target(tmp_path, retention=3600.0)
    path = tombstone_path(target.path)
    batches = 2 * COMPACT_EVERY + 5
    for b in range(batches):
        record_tombstones(_rows((b, 1)), target, now=T0 + dt.timedelta(minutes=b))
    assert len(_files(path)) <= COMPACT_EVERY // 2
    # at minute 100 the tombstones of minutes 0..39 are older than the hour kept
    later = T0 + dt.timedelta(minutes=100)
    in_force = list(range(40, batches))
    assert sorted(_kept(record_tombstones(_rows(), target, now=later))) == in_force
    done = maintain_tombstones(target, now=later)
    assert done["expired"] > 0 and done["vacuumed"] > 0
    assert sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == in_force
    assert len(_files(path)) == 1
