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
