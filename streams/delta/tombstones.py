"""Tombstones of an upsert (SCD1) sink with `sequence_by`: deletes it remembers.

A delete removes the key's row, and with it the row's sequence value that made older
changes lose: a change older than the delete arriving in a later batch (CDC records
out of order across partitions or replays) would find no row and insert the key
again. So the sink keeps, per deleted key, the delete's sequence value and when it was
recorded, in a companion Delta table `<table>__tombstones` (`tombstone_path`), and
drops a batch's changes older than their key's tombstone before its MERGE. The table
itself holds only live rows, so its readers (snapshots, `read: changes`, row counts,
published views) need to know nothing of tombstones.

A tombstone is kept for `DeltaTarget.tombstone_retention` seconds after it was
recorded (Lakeflow's AUTO CDC keeps its delete tombstones for a retention too); an
older change arriving later than that brings the key back. Expired tombstones are
removed when a batch of the sink writes its tombstones.

Crash safety: the tombstone table is written before the table's MERGE, without an
app transaction: its update is idempotent (a tombstone only moves to a greater
sequence), and filtering the batch's changes gives the same rows before or after
its own tombstones are in, so a replayed batch (crash between the two commits)
merges exactly what the first attempt would have.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import write_deltalake

from streams.delta.arrow import read_table
from streams.delta.commit import kept_table
from streams.delta.tables import storage_options
from streams.delta.target import DeltaTarget

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

logger = logging.getLogger(__name__)

TOMBSTONES_SUFFIX = "__tombstones"
DELETED_AT = "_deleted_at"
_TOMB_SEQ = "__warehouse_tombstone_seq"
_ROW = "__warehouse_row"


def tombstone_path(table_path: str) -> str:
    """Where the tombstones of the upsert table at `table_path` live."""
    return str(table_path).rstrip("/") + TOMBSTONES_SUFFIX


COMPACT_EVERY = 50
"""Versions of the tombstone table between two compactions (and vacuums)."""


def _schema(deletes: pa.Schema, keys: Sequence[str], seq: str) -> pa.Schema:
    return pa.schema(
        [
            *(deletes.field(c) for c in [*keys, seq]),
            pa.field(DELETED_AT, pa.timestamp("us", tz="UTC")),
        ]
    )


def read_tombstones(
    target: DeltaTarget, touched: pa.Table | None, *, now: dt.datetime
) -> pa.Table | None:
    """The tombstones in force (recorded within the retention) of the keys of `touched`
    (every key when None), key columns and `sequence_by`; None when there are none. Only
    the files whose statistics may hold those keys are read."""
    assert target.sequence_by
    seq, keys = target.sequence_by, list(target.keys)
    with kept_table(tombstone_path(target.path)) as kept:
        table = kept.get()
    if table is None or (touched is not None and touched.num_rows == 0):
        return None
    cutoff = now - dt.timedelta(seconds=target.tombstone_retention)
    live = pc.field(DELETED_AT) >= pa.scalar(cutoff, pa.timestamp("us", tz="UTC"))
    keys_in = None if touched is None else {k: touched.column(k) for k in keys}
    found = read_table(table, columns=[*keys, seq], filter=live, keys_in=keys_in)
    return found if found.num_rows else None


def record_tombstones(
    deletes: pa.Table,
    target: DeltaTarget,
    *,
    touched: pa.Table | None = None,
    now: dt.datetime | None = None,
) -> pa.Table | None:
    """Record `deletes` (rows with the key columns and `sequence_by`, one per key: the
    batch's winning deletes) as tombstones, and return the tombstones in force of the
    keys of `touched` (the batch's changes; every key when None), key columns and
    `sequence_by`; None when there are none.

    A delete is merged into `<table>__tombstones` (delta-rs, not read into Python) when
    its key has no tombstone in force or an older one: a replayed batch commits
    nothing. Every `COMPACT_EVERY` versions the expired tombstones are deleted and the
    table compacted and vacuumed (`maintain_tombstones`); until then an expired one is
    only left out of what is read."""
    assert target.sequence_by
    seq, keys = target.sequence_by, list(target.keys)
    now = now or dt.datetime.now(dt.UTC)
    deletes = deletes.select([*keys, seq]).filter(pc.is_valid(deletes.column(seq)))
    if deletes.num_rows:
        current = read_tombstones(target, deletes, now=now)
        fresh = keep_after_tombstones(deletes, current, target, strictly=True)
        if fresh.num_rows:
            _merge(fresh, target, now)
    return read_tombstones(target, touched, now=now)


def _merge(fresh: pa.Table, target: DeltaTarget, now: dt.datetime) -> None:
    seq, keys = target.sequence_by, list(target.keys)
    assert seq
    path = tombstone_path(target.path)
    rows = fresh.append_column(
        DELETED_AT, pa.array([now] * fresh.num_rows, pa.timestamp("us", tz="UTC"))
    ).cast(_schema(fresh.schema, keys, seq))
    with kept_table(path) as kept:
        table = kept.get()
        if table is None:
            write_deltalake(path, rows, mode="append", storage_options=storage_options(path))
            kept.forget()
            return
        on = " AND ".join(f"t.{_q(k)} = s.{_q(k)}" for k in keys)
        (
            table.merge(rows, on, source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        version = table.version()
    logger.info("Delta table %s: %d tombstone(s) recorded", target.name, fresh.num_rows)
    if version % COMPACT_EVERY == 0:
        maintain_tombstones(target, now=now)


def maintain_tombstones(target: DeltaTarget, *, now: dt.datetime | None = None) -> dict[str, int]:
    """Delete the expired tombstones, compact `<table>__tombstones` into few files and
    vacuum the files that no longer hold its rows. Run by `record_tombstones` every
    `COMPACT_EVERY` versions, inside a batch of the table's one writer (which holds the
    table's lock), so no reader or writer of an older version is left to need them
    (retention 0). Returns the tombstones expired, files compacted and files removed."""
    now = now or dt.datetime.now(dt.UTC)
    cutoff = now - dt.timedelta(seconds=target.tombstone_retention)
    with kept_table(tombstone_path(target.path)) as kept:
        table = kept.get()
        if table is None:
            return {"expired": 0, "compacted": 0, "vacuumed": 0}
        when = cutoff.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        expired = table.delete(f"{_q(DELETED_AT)} < '{when}'").get("num_deleted_rows", 0)
        compacted = table.optimize.compact().get("numFilesRemoved", 0)
        removed = table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    logger.info(
        "Delta table %s: %d tombstone(s) expired (retention %ss), %d file(s) compacted, "
        "%d vacuumed",
        target.name,
        expired,
        target.tombstone_retention,
        compacted,
        len(removed),
    )
    return {"expired": int(expired), "compacted": int(compacted), "vacuumed": len(removed)}


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def keep_after_tombstones(
    data: pa.Table, tombstones: pa.Table | None, target: DeltaTarget, *, strictly: bool = False
) -> pa.Table:
    """The rows of `data` (deduped changes) not older than their key's tombstone
    (`strictly`: newer than it, for deletes that would move a tombstone)."""
    if tombstones is None or data.num_rows == 0:
        return data
    seq, keys = target.sequence_by, list(target.keys)
    assert seq
    # One Arrow hash join of the keys, not a Python loop over the batch; the row numbers
    # ride along so the kept rows keep their order.
    dead = tombstones.select([*keys, seq]).rename_columns([*keys, _TOMB_SEQ])
    rows = data.select([*keys, seq]).append_column(_ROW, pa.array(range(data.num_rows), pa.int64()))
    joined = rows.join(dead, keys=keys, join_type="left outer")
    at, mine = joined.column(_TOMB_SEQ), joined.column(seq)
    newer = pc.greater(mine, at) if strictly else pc.greater_equal(mine, at)
    keep = pc.or_kleene(pc.is_null(at), pc.and_kleene(pc.is_valid(mine), newer))
    survivors = joined.filter(pc.fill_null(keep, False)).column(_ROW)
    kept = data.take(pc.take(survivors, pc.sort_indices(survivors)))
    if kept.num_rows < data.num_rows and not strictly:
        logger.info(
            "Delta table %s: %d change(s) older than their key's delete dropped",
            target.name,
            data.num_rows - kept.num_rows,
        )
    return kept


def keep_after_tombstones_spark(
    changes: DataFrame, target: DeltaTarget, *, now: dt.datetime | None = None
) -> DataFrame:
    """`keep_after_tombstones` for a Spark frame of deduped changes (native engine): a
    join in Spark with the tombstones in force, read by Spark's `delta` reader; nothing
    of either comes to the driver."""
    from pyspark.sql import functions as F

    seq, keys = target.sequence_by, list(target.keys)
    assert seq
    path = tombstone_path(target.path)
    with kept_table(path) as kept:
        if kept.get() is None:
            return changes
    cutoff = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(seconds=target.tombstone_retention)
    dead = (
        changes.sparkSession.read.format("delta")
        .load(path)
        .where(F.col(DELETED_AT) >= F.lit(cutoff))
        .select(*keys, F.col(seq).alias(_TOMB_SEQ))
    )
    cond = [changes[k].eqNullSafe(dead[k]) for k in keys]
    joined = changes.join(dead, on=cond, how="left")
    keep = F.col(_TOMB_SEQ).isNull() | (
        changes[seq].isNotNull() & (changes[seq] >= F.col(_TOMB_SEQ))
    )
    return joined.where(keep).select(*[changes[c] for c in changes.columns])
