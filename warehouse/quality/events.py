"""Quality events: per batch and expectation, rows checked, passed and failed.

They land in the Delta table `<root>/tables/_quality_events`, queryable like
any other table, and `warehouse status` summarises them (`warehouse.quality.summary`,
reading only what was added since it last read).

Events are kept for `quality.events_retention` (30 days, Delta's default log
retention): a write deletes the events recorded longer ago, at most once per tenth of
the retention (and once an hour) of the writers' clock, then vacuums the files the
delete replaced and Delta's own retention (7 days) no longer protects.

The metrics of a batch are a handful of rows computed on the driver, so they
are written from the driver with delta-rs (no Spark job), under the same
exactly-once rule as the sink: a Delta app transaction `(app_id, batch_id)`
makes a replayed batch a no-op. Appends from several tables' queries at once
are serialised per events table within a process (queries of one driver run in
threads), and a commit that lost a race with another process is retried.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

import streams.storage as storage
from warehouse.spec.paths import EVENTS_TABLE, events_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streams.delta import KeptTable

logger = logging.getLogger(__name__)

COMMIT_ATTEMPTS = 5
DEFAULT_RETENTION = 30 * 86400.0
"""Seconds events are kept when the caller says nothing: `quality.events_retention`'s
default."""
EXPIRE_EVERY = 3600.0
"""Seconds of the writers' clock between two deletes of expired events, at most."""

_expired_at: dict[str, datetime] = {}
"""Per events table: the writers' time of this process's last look for expired events."""

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock_for(path: str) -> threading.Lock:
    """The lock of an events table in this process: every batch of every checked table
    appends to it, through the table kept open for them (`kept_table`)."""
    with _locks_guard:
        return _locks.setdefault(str(path), threading.Lock())


EVENTS_ARROW_SCHEMA = pa.schema(
    [
        pa.field("table", pa.string()),
        pa.field("batch_id", pa.int64()),
        pa.field("expectation", pa.string()),
        pa.field("on_violation", pa.string()),
        pa.field("checked", pa.int64()),
        pa.field("passed", pa.int64()),
        pa.field("failed", pa.int64()),
        pa.field("recorded_at", pa.timestamp("us", tz="UTC")),
    ]
)
EVENTS_DDL = (
    "table string, batch_id bigint, expectation string, on_violation string, "
    "checked bigint, passed bigint, failed bigint, recorded_at timestamp"
)


def _rows(metrics: Sequence[dict[str, Any]], recorded_at: datetime) -> list[dict[str, Any]]:
    return [
        {
            "table": m["table"],
            "batch_id": int(m["batch_id"]),
            "expectation": m["expectation"],
            "on_violation": m["on_violation"],
            "checked": int(m["checked"]),
            "passed": int(m["passed"]),
            "failed": int(m["failed"]),
            "recorded_at": recorded_at,
        }
        for m in metrics
    ]


def quality_events_frame(
    spark: SparkSession, metrics: Sequence[dict[str, Any]], *, now: datetime | None = None
) -> DataFrame:
    """The metrics of `RowChecks.apply` as a Spark DataFrame with the events schema."""
    recorded_at = now or datetime.now(UTC)
    return spark.createDataFrame(_rows(metrics, recorded_at), EVENTS_DDL)


def write_quality_events(
    spark: SparkSession | None,
    root: str | Path,
    metrics: Sequence[dict[str, Any]],
    *,
    app_id: str,
    batch_id: int,
    now: datetime | None = None,
    retention: float = DEFAULT_RETENTION,
) -> int | None:
    """Append one batch's metrics to `<root>/tables/_quality_events`.

    Returns the new Delta version, or None when there was nothing to write or
    `(app_id, batch_id)` was already committed (a replayed batch). `spark` is
    accepted for symmetry with the other writers and is not needed. Events recorded
    more than `retention` seconds before `now` are deleted (see the module's docstring).
    """
    if not metrics:
        return None
    path = events_path(root)
    now = now or datetime.now(UTC)
    data = pa.Table.from_pylist(_rows(metrics, now), EVENTS_ARROW_SCHEMA)
    from deltalake.exceptions import CommitFailedError

    # Imported here: importing `warehouse.quality` loads neither Spark nor delta-rs.
    from streams.delta import kept_table

    with _lock_for(path), kept_table(str(path)) as kept:
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            try:
                version = _append(path, kept, data, app_id=app_id, batch_id=batch_id)
                _expire(path, kept, now, retention)
                return version
            except CommitFailedError as e:  # another process committed first
                if attempt == COMMIT_ATTEMPTS:
                    raise
                logger.info(
                    "quality events of batch %s: commit to %s lost a race (%s); retry %d",
                    batch_id, path, e, attempt,
                )  # fmt: skip
                time.sleep(0.05 * attempt)
    raise AssertionError("unreachable")


def _append(
    path: str, kept: KeptTable, data: pa.Table, *, app_id: str, batch_id: int
) -> int | None:
    from deltalake import CommitProperties, Transaction, write_deltalake

    table = kept.get()
    if table is not None:
        done = table.transaction_version(app_id)
        if done is not None and done >= batch_id:
            logger.info(
                "quality events of %s batch %s already committed (app %s); skipped",
                path, batch_id, app_id,
            )  # fmt: skip
            return None
    if storage.is_local(path):
        os.makedirs(storage.parent(path), exist_ok=True)
    try:
        write_deltalake(
            table if table is not None else path,
            data,
            mode="append",
            storage_options=None
            if table is not None
            else storage.current().object_store_options(path),
            commit_properties=CommitProperties(
                app_transactions=[Transaction(app_id, int(batch_id))],
                custom_metadata={
                    "warehouse.batchId": str(batch_id),
                    "warehouse.table": EVENTS_TABLE,
                },
            ),
        )
    except BaseException:
        kept.forget()
        raise
    # A write through the kept table moves it to the new version; the table's first
    # write creates it, and the next `get` opens it.
    version = table.version() if table is not None else kept.get().version()
    logger.info(
        "wrote %d quality events for batch %s to %s (v%s)", data.num_rows, batch_id, path, version
    )
    return version


def _expire(path: str, kept: KeptTable, now: datetime, retention: float) -> None:
    """Delete the events recorded before `now - retention`, when this process has not
    looked for a tenth of the retention (at most an hour) of the writers' clock; then
    vacuum with Delta's default retention. A delete that loses a race with another
    writer is left to the next look."""
    from datetime import timedelta

    from deltalake.exceptions import DeltaError

    last = _expired_at.get(str(path))
    if last is not None and (now - last).total_seconds() < min(EXPIRE_EVERY, retention / 10):
        return
    table = kept.get()
    if table is None:
        return
    _expired_at[str(path)] = now
    cutoff = (now - timedelta(seconds=retention)).astimezone(UTC)
    try:
        deleted = table.delete(f"recorded_at < '{cutoff.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}'")
        if deleted.get("num_deleted_rows"):
            removed = table.vacuum(dry_run=False)
            logger.info(
                "quality events %s: deleted %d event(s) recorded before %s (retention %ss); "
                "vacuum removed %d file(s)",
                path, deleted["num_deleted_rows"], cutoff.isoformat(), retention, len(removed),
            )  # fmt: skip
    except DeltaError as e:
        kept.forget()
        _expired_at.pop(str(path), None)
        logger.warning("quality events %s: deleting expired events failed (%s); retried at "
                       "the next write", path, e)  # fmt: skip


def read_quality_events(root: str | Path, *, table: str | None = None) -> pa.Table | None:
    """All quality events (optionally of one table); None when none were ever written."""
    from deltalake import DeltaTable

    path = events_path(root)
    if not DeltaTable.is_deltatable(
        path, storage_options=storage.current().object_store_options(path)
    ):
        return None
    from streams.delta import read_table

    data = read_table(path)
    if table is not None:
        import pyarrow.compute as pc

        data = data.filter(pc.equal(data["table"], table))
    return data


def quality_summary(root: str | Path, table: str) -> dict[str, Any]:
    """For `warehouse status`: the table's last checked batch and totals per expectation
    (`warehouse.quality.summary.quality_summaries`, for one table)."""
    from warehouse.quality.summary import quality_summaries

    return quality_summaries(root, [table])[table]
