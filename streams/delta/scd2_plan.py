"""SCD type 2 planning: a batch of changes and what the table holds -> closes and inserts.

Pure (no Spark, no Delta): `streams.delta.scd2` loads the table's state per key,
calls `plan_scd2` and applies the plan in one MERGE. Each key's changes are ordered
by `sequence_by` and turned into a chain of versions. The rules (docs/cdc.md):

- `valid_from` of a version is its change's `sequence_by` value as a time:
  a timestamp as is, a date at midnight UTC, an integer column whose name ends
  in `_ms` as epoch milliseconds. Any other sequence (a log position, a version
  number) orders the changes, and the time comes from `_source_ts_ms`, else the
  Kafka `_timestamp`, else the batch's processing time.
- a version is closed (`valid_to` = the next change's `valid_from`,
  `is_current = false`) by the next change of its key, update or delete; a delete
  opens nothing, so a deleted key has no current row; a later insert opens a
  new version (delete-then-reinsert).
- a delete that closes nothing (the key is unknown or already deleted), or any
  delete when the sequence is not time-like, is recorded as a zero-length closed
  version (`valid_from = valid_to`): the table must remember the delete's time or
  sequence, or an older change arriving later would bring the key back.
- a change not newer than what the table holds for its key is stale and ignored
  (out-of-order arrival, duplicates): with a time-like sequence "newer" means
  after the key's latest `valid_from` and `valid_to` (so a late change older than
  a delete does not resurrect the key); otherwise after the key's greatest stored
  `sequence_by`. Within a batch, changes with the same sequence keep the last
  (by `_offset`, then arrival).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

VALID_FROM = "valid_from"
VALID_TO = "valid_to"
IS_CURRENT = "is_current"
SCD2_COLUMNS: tuple[str, ...] = (VALID_FROM, VALID_TO, IS_CURRENT)
"""Columns an SCD2 table adds to the change's columns."""

ARRIVAL = "__warehouse_arrival"
"""The arrival-order column `apply_scd2` adds to a batch (last tie-breaker)."""
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

Key = tuple[Any, ...]


@dataclass
class KeyState:
    """What the table holds for one key: its current row (if any) and its high-water mark."""

    has_current: bool = False
    last_time: dt.datetime | None = None
    last_sequence: Any = None


@dataclass
class Scd2Plan:
    """The effect of one batch: current rows to close, versions to insert, stale changes."""

    closes: list[dict[str, Any]] = field(default_factory=list)
    inserts: list[dict[str, Any]] = field(default_factory=list)
    stale: int = 0
    delete_markers: int = 0


def time_like(sequence_by: str, sequence_type: pa.DataType) -> bool:
    """Whether `valid_from` is the sequence value itself (see the module docstring)."""
    return (
        pa.types.is_timestamp(sequence_type)
        or pa.types.is_date(sequence_type)
        or (pa.types.is_integer(sequence_type) and sequence_by.lower().endswith("_ms"))
    )


def _as_time(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC)
    return _EPOCH + dt.timedelta(milliseconds=int(value))


def change_time(
    sequence_by: str, sequence_type: pa.DataType, now: dt.datetime
) -> Callable[[Mapping[str, Any]], dt.datetime]:
    """The function giving a change's `valid_from` (the rule of the module docstring)."""
    if time_like(sequence_by, sequence_type):
        return lambda row: _as_time(row[sequence_by])

    def fallback(row: Mapping[str, Any]) -> dt.datetime:
        for column in ("_source_ts_ms", "_timestamp"):
            value = row.get(column)
            if value is not None:
                return _as_time(value)
        return now

    return fallback


def is_delete(row: Mapping[str, Any]) -> bool:
    return row.get("_op") == "d" or bool(row.get("_deleted"))


def _one_per_sequence(rows: list[Mapping[str, Any]], sequence_by: str) -> list[Mapping[str, Any]]:
    """The rows of a key in order, one per sequence value: with equal sequences the last
    delivery wins (a duplicate or a re-sent change)."""
    chain: list[Mapping[str, Any]] = []
    for row in rows:
        if chain and chain[-1][sequence_by] == row[sequence_by]:
            chain[-1] = row
        else:
            chain.append(row)
    return chain


def plan_scd2(
    changes: Iterable[Mapping[str, Any]],
    state: Mapping[Key, KeyState],
    *,
    keys: Sequence[str],
    sequence_by: str,
    time_of: Callable[[Mapping[str, Any]], dt.datetime],
    time_ordered: bool,
    stored: Sequence[str],
) -> Scd2Plan:
    """Turn a batch of changes into closes and inserts (pure: no Spark, no Delta).

    `changes` are rows with the key, `sequence_by`, optional `_op`/`_deleted`,
    `_offset` and `__warehouse_arrival`; `state` what the table holds per key;
    `stored` the table's data columns (the inserted rows carry exactly these).
    """
    by_key: dict[Key, list[Mapping[str, Any]]] = {}
    for row in changes:
        by_key.setdefault(tuple(row[k] for k in keys), []).append(row)
    plan = Scd2Plan()

    def order(row: Mapping[str, Any]) -> tuple[Any, int, int]:
        offset = row.get("_offset")
        return (row[sequence_by], -1 if offset is None else offset, row.get(ARRIVAL) or 0)

    for key, rows in by_key.items():
        rows.sort(key=order)
        chain = _one_per_sequence(rows, sequence_by)
        known = state.get(key, KeyState())
        open_row: dict[str, Any] | None = None  # a version inserted by this batch
        table_open = known.has_current
        for row in chain:
            t = time_of(row)
            if time_ordered:
                fresh = known.last_time is None or t > known.last_time
            else:
                fresh = known.last_sequence is None or row[sequence_by] > known.last_sequence
            if not fresh:
                plan.stale += 1
                continue
            closed = table_open or open_row is not None
            if table_open:
                plan.closes.append({**dict(zip(keys, key, strict=True)), VALID_TO: t})
                table_open = False
            elif open_row is not None:
                open_row[VALID_TO] = t
                open_row[IS_CURRENT] = False
                open_row = None
            version = {c: row.get(c) for c in stored}
            if is_delete(row):
                if not closed or not time_ordered:
                    # Nothing holds the delete's time or sequence: record it as a
                    # zero-length version, so that older changes arriving later stay stale.
                    version.update({VALID_FROM: t, VALID_TO: t, IS_CURRENT: False})
                    plan.inserts.append(version)
                    plan.delete_markers += 1
                continue
            version.update({VALID_FROM: t, VALID_TO: None, IS_CURRENT: True})
            plan.inserts.append(version)
            open_row = version
    return plan
