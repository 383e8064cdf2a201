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
from typing import TYPE_CHECKING, Any

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


def _key(row: dict[str, Any], keys: Sequence[str]) -> tuple:
    return tuple(row[k] for k in keys)


def record_tombstones(
    deletes: pa.Table, target: DeltaTarget, *, now: dt.datetime | None = None
) -> pa.Table | None:
    """Record `deletes` (rows with the key columns and `sequence_by`, one per key: the
    batch's winning deletes) as tombstones, drop the expired ones, and return the
    tombstones now kept (key columns and `sequence_by`); None when there are none."""
    assert target.sequence_by
    seq, keys = target.sequence_by, list(target.keys)
    now = now or dt.datetime.now(dt.UTC)
    path = tombstone_path(target.path)
    state: dict[tuple, dict[str, Any]] = {}
    with kept_table(path) as kept:
        table = kept.get()
        if table is not None:
            for row in read_table(table).to_pylist():
                state[_key(row, keys)] = row
    changed = False
    for row in deletes.select([*keys, seq]).to_pylist():
        if row[seq] is None:  # a delete without a sequence orders nothing
            continue
        old = state.get(_key(row, keys))
        if old is None or row[seq] > old[seq]:
            state[_key(row, keys)] = {**row, DELETED_AT: now}
            changed = True
    cutoff = now - dt.timedelta(seconds=target.tombstone_retention)
    expired = [k for k, row in state.items() if row[DELETED_AT] < cutoff]
    for k in expired:
        del state[k]
    if changed or expired:
        schema = pa.schema(
            [
                *(deletes.schema.field(c) for c in [*keys, seq]),
                pa.field(DELETED_AT, pa.timestamp("us", tz="UTC")),
            ]
        )
        rows = pa.Table.from_pylist(list(state.values()), schema=schema)
        # One small table rewritten whole: bounded by the deletes within the retention.
        write_deltalake(
            path,
            rows,
            mode="overwrite",
            schema_mode="overwrite",
            storage_options=storage_options(path),
        )
        logger.info(
            "Delta table %s: %d tombstone(s) kept, %d expired (retention %ss)",
            target.name,
            len(state),
            len(expired),
            target.tombstone_retention,
        )
    if not state:
        return None
    return pa.Table.from_pylist(
        [
            {**{k: v for k, v in zip(keys, key, strict=True)}, seq: row[seq]}
            for key, row in state.items()
        ],
        schema=pa.schema([*(deletes.schema.field(c) for c in [*keys, seq])]),
    )


def keep_after_tombstones(
    data: pa.Table, tombstones: pa.Table | None, target: DeltaTarget
) -> pa.Table:
    """The rows of `data` (deduped changes) not older than their key's tombstone."""
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
    keep = pc.or_kleene(
        pc.is_null(at), pc.and_kleene(pc.is_valid(mine), pc.greater_equal(mine, at))
    )
    survivors = joined.filter(pc.fill_null(keep, False)).column(_ROW)
    kept = data.take(pc.take(survivors, pc.sort_indices(survivors)))
    if kept.num_rows < data.num_rows:
        logger.info(
            "Delta table %s: %d change(s) older than their key's delete dropped",
            target.name,
            data.num_rows - kept.num_rows,
        )
    return kept


def keep_after_tombstones_spark(
    changes: DataFrame, tombstones: pa.Table | None, target: DeltaTarget
) -> DataFrame:
    """`keep_after_tombstones` for a Spark frame of deduped changes (native engine)."""
    from pyspark.sql import functions as F

    if tombstones is None:
        return changes
    seq, keys = target.sequence_by, list(target.keys)
    assert seq
    dead = changes.sparkSession.createDataFrame(tombstones).withColumnRenamed(seq, _TOMB_SEQ)
    cond = [changes[k].eqNullSafe(dead[k]) for k in keys]
    joined = changes.join(dead, on=cond, how="left")
    keep = F.col(_TOMB_SEQ).isNull() | (
        changes[seq].isNotNull() & (changes[seq] >= F.col(_TOMB_SEQ))
    )
    return joined.where(keep).select(*[changes[c] for c in changes.columns])
