"""Maintenance and introspection of sink tables: compaction, vacuum, orphans, status.

`recorded_offsets`, `recorded_batch` and `table_info` read the commit info the sink
writes (`warehouse.sourceOffsets`, `warehouse.startOffsets`, `warehouse.batchId`,
`warehouse.table`, `warehouse.appId`), so status and recovery need only the table itself.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

import streams.storage as storage
from streams.delta.adds import add_actions, file_bytes, file_rows
from streams.delta.errors import DeltaConfigError, DeltaTableNotFoundError
from streams.delta.files import STAGING_DIR
from streams.delta.tables import open_table
from streams.delta.target import (
    APP_KEY,
    BATCH_KEY,
    OFFSETS_KEY,
    START_KEY,
    TABLE_KEY,
    newest_recorded,
    recorded_info,
    recorded_value,
)

logger = logging.getLogger(__name__)

LOG_DIR = "_delta_log"


def _open(path: str | Path, what: str) -> DeltaTable:
    try:
        return open_table(str(path))
    except TableNotFoundError as e:
        raise DeltaTableNotFoundError(
            f"No Delta table at `{path}` to {what}; run the table's query first "
            "(`warehouse run --table ...`).",
            path=str(path),
        ) from e


@dataclass(frozen=True)
class RecordedBatch:
    """A batch as its commit recorded it: its writer (`app_id`), its id, the source
    offsets it started from (None in a commit that did not record them) and ended at."""

    app_id: str | None
    batch_id: int | None
    start: dict | None
    end: dict


def recorded_batch(path: str | Path, table: str | None = None) -> RecordedBatch | None:
    """The newest commit that recorded source offsets (and, if `table` is given, was
    written for that table) as a `RecordedBatch`; None when no commit has them."""
    dt = _open(path, "read recorded offsets from")
    for info in newest_recorded(dt, (64 * 4**i for i in itertools.count())):
        if OFFSETS_KEY not in info:
            continue
        if table is not None and info.get(TABLE_KEY) not in (None, table):
            continue
        batch = recorded_value(info[BATCH_KEY]) if BATCH_KEY in info else None
        return RecordedBatch(
            app_id=info.get(APP_KEY),
            batch_id=None if batch is None else int(batch),
            start=recorded_value(info[START_KEY]) if START_KEY in info else None,
            end=recorded_value(info[OFFSETS_KEY]),
        )
    return None


def first_recorded_start(path: str | Path, table: str | None = None) -> dict | None:
    """The source offsets the oldest commit that recorded them (and, if `table` is given,
    was written for that table) started from: where the rows the table holds begin in
    its topics, as far as its log goes back. None when no commit has them."""
    dt = _open(path, "read recorded offsets from")
    first = None
    for info in newest_recorded(dt, (64 * 4**i for i in itertools.count())):
        if START_KEY in info and (table is None or info.get(TABLE_KEY) in (None, table)):
            first = recorded_value(info[START_KEY])
    return first


def recorded_offsets(path: str | Path, table: str | None = None) -> dict | None:
    """The source end offsets of the newest commit that recorded them (and, if `table` is
    given, was written for that table); None when no commit has them."""
    batch = recorded_batch(path, table)
    return None if batch is None else batch.end


def table_info(path: str | Path) -> dict[str, Any]:
    """Version, rows and files (from add-action stats, no scan), and the last commit.

    `rows` is None when some file has no `numRecords` statistic.
    """
    dt = _open(path, "describe")
    adds = add_actions(dt)
    rows = file_rows(adds)
    last = recorded_info(dt.history(1)[0])
    batch = recorded_value(last.get(BATCH_KEY)) if BATCH_KEY in last else None
    return {
        "path": str(path),
        "version": dt.version(),
        "rows": rows,
        "files": adds.num_rows,
        "bytes": file_bytes(adds),
        "partition_by": list(dt.metadata().partition_columns),
        "last_commit": {
            "timestamp": last.get("timestamp"),
            "operation": last.get("operation"),
            "batch_id": batch,
            "table": last.get(TABLE_KEY),
            "offsets": recorded_value(last[OFFSETS_KEY]) if OFFSETS_KEY in last else None,
        },
    }


def optimize(path: str | Path, *, target_size: int | None = None) -> dict[str, Any]:
    """Compact small files (delta-rs `optimize.compact`); returns its metrics.

    The commit changes no data (`dataChange=false`), so stream readers skip it and
    the app transactions of the writers are untouched.
    """
    dt = _open(path, "optimize")
    metrics = dt.optimize.compact(target_size=target_size)
    logger.info(
        "Delta table %s: optimize removed %s files, added %s",
        path,
        metrics.get("numFilesRemoved"),
        metrics.get("numFilesAdded"),
    )
    return metrics


DEFAULT_DELETED_FILE_RETENTION = "interval 1 week"
"""Delta's `delta.deletedFileRetentionDuration` when a table does not set it: the least
retention a vacuum keeps unless forced."""

_INTERVAL_UNITS = {
    "millisecond": 0.001,
    "second": 1.0,
    "minute": 60.0,
    "hour": 3600.0,
    "day": 86400.0,
    "week": 604800.0,
}


def deleted_file_retention(path: str | Path) -> tuple[str, float]:
    """The table's `delta.deletedFileRetentionDuration` as written (Delta's default when it
    sets none) and in hours."""
    dt = _open(path, "read the retention of")
    text = dt.metadata().configuration.get(
        "delta.deletedFileRetentionDuration", DEFAULT_DELETED_FILE_RETENTION
    )
    words = str(text).lower().replace("interval", " ").split()
    seconds = 0.0
    for amount, unit in zip(words[::2], words[1::2], strict=False):
        try:
            seconds += float(amount) * _INTERVAL_UNITS[unit.rstrip("s")]
        except (KeyError, ValueError):
            raise DeltaConfigError(
                f"Delta table `{path}`: `delta.deletedFileRetentionDuration` is `{text}`, "
                "not an interval such as `interval 1 week` or `interval 168 hours`.",
                path=str(path),
                option="delta.deletedFileRetentionDuration",
            ) from None
    return str(text), seconds / 3600.0


def table_id(path: str | Path) -> str:
    """The table's id (its metadata's), which stream readers' offsets name it by."""
    return str(_open(path, "read the id of").metadata().id)


def commit_time(path: str | Path, version: int) -> float | None:
    """When `version` of the table was committed (epoch seconds), or None when the log no
    longer has (or never had) that version."""
    dt = _open(path, "read the history of")
    if version > dt.version():
        return None
    for commit in dt.history(dt.version() - version + 1):
        if int(commit.get("version", -1)) == version and commit.get("timestamp") is not None:
            return float(commit["timestamp"]) / 1000.0
    return None


def vacuum(
    path: str | Path, retention_hours: int = 168, *, dry_run: bool = False, force: bool = False
) -> list[str]:
    """Delete files the table stopped referencing more than `retention_hours` ago.

    A stream reader that is behind by more than the retention can no longer read the
    versions whose files are gone; keep the retention above the longest downtime. Delta's
    minimum, the table's `delta.deletedFileRetentionDuration`, holds unless `force`.
    """
    dt = _open(path, "vacuum")
    # delta-rs names every file the log's tombstones hold, deleted by an earlier vacuum or
    # not (a dry run relative to the table, a real one absolute); only the ones still there
    # are what this call deletes.
    candidates = dt.vacuum(
        retention_hours=retention_hours, dry_run=True, enforce_retention_duration=not force
    )
    found = (f if "://" in f else os.path.join(str(path), f) for f in candidates)
    removed = [f for f in found if storage.exists(f)]  # an absolute f stays
    if removed and not dry_run:
        dt.vacuum(
            retention_hours=retention_hours, dry_run=False, enforce_retention_duration=not force
        )
    logger.info(
        "Delta table %s: vacuum %s %d files",
        path,
        "would delete" if dry_run else "deleted",
        len(removed),
    )
    return removed


def _referenced(root: str) -> set[str]:
    """Every data file path any commit still in the log mentions, plus the snapshot's."""
    seen: set[str] = set()
    log = storage.join(root, LOG_DIR)
    for name in storage.list_names(log):
        if not name.endswith(".json"):
            continue
        for line in (storage.read_text(storage.join(log, name)) or "").splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            for kind in ("add", "remove", "cdc"):
                if kind in action:
                    seen.add(unquote(action[kind]["path"]))
    dt = open_table(root)
    adds = pa.table(dt.get_add_actions(flatten=False))
    seen.update(unquote(p) for p in adds.column("path").to_pylist())
    return seen


def remove_orphans(
    path: str | Path, *, older_than_hours: float = 1.0, dry_run: bool = False
) -> list[str]:
    """Delete data files no commit references (left by attempts that died before
    committing) once they are older than the grace period; returns their paths.

    The grace period protects the files of a batch being written right now: on a local
    disk by the files' and the staging folders' modification times, on object storage by
    when the objects were written (a staging folder's newest).
    """
    path = str(path)
    _open(path, "clean up")
    referenced = _referenced(path)
    cutoff = time.time() - older_than_hours * 3600
    local = storage.local_path(path)
    if local is not None:
        orphans = _local_orphans(Path(local), referenced, cutoff, dry_run=dry_run)
    else:
        orphans = _remote_orphans(path, referenced, cutoff, dry_run=dry_run)
    logger.info(
        "Delta table %s: %s %d orphan files",
        path,
        "found" if dry_run else "removed",
        len(orphans),
    )
    return orphans


def _remote_orphans(path: str, referenced: set[str], cutoff: float, *, dry_run: bool) -> list[str]:
    orphans: list[str] = []
    stages: dict[str, float] = {}
    for rel, mtime in storage.walk_file_times(path):
        parts = rel.split("/")
        if parts[0] == LOG_DIR:
            continue
        if parts[0] == STAGING_DIR:
            if len(parts) > 2:
                stages[parts[1]] = max(stages.get(parts[1], 0.0), mtime)
            continue
        if rel.endswith(".parquet") and rel not in referenced and mtime <= cutoff:
            orphans.append(rel)
    stale = [
        f"{STAGING_DIR}/{name}/" for name, newest in sorted(stages.items()) if newest <= cutoff
    ]
    # A staging folder that holds no file, only the directory markers Hadoop's s3a keeps
    # (`<name>/_temporary/0/`): nothing in it to protect, and nothing ever commits from it.
    stale += [
        f"{STAGING_DIR}/{name}/"
        for name in storage.list_names(storage.join(path, STAGING_DIR))
        if name not in stages
    ]
    if not dry_run:
        for rel in orphans + stale:
            storage.remove(storage.join(path, rel))
    return orphans + stale


def _local_orphans(root: Path, referenced: set[str], cutoff: float, *, dry_run: bool) -> list[str]:
    orphans: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        if rel_dir.parts and rel_dir.parts[0] == LOG_DIR:
            dirnames[:] = []
            continue
        if rel_dir.parts and rel_dir.parts[0] == STAGING_DIR:
            # A write attempt's staging directory: nothing in it is ever committed
            # from there (files are moved out first); gone once the attempt is old.
            dirnames[:] = []
            for name in sorted(os.listdir(dirpath)):
                stage = Path(dirpath) / name
                if stage.stat().st_mtime <= cutoff:
                    orphans.append((rel_dir / name).as_posix() + "/")
                    if not dry_run:
                        shutil.rmtree(stage, ignore_errors=True)
            continue
        for name in filenames:
            rel = (rel_dir / name).as_posix()
            if not name.endswith(".parquet") or rel in referenced:
                continue
            full = Path(dirpath) / name
            if full.stat().st_mtime > cutoff:
                continue
            orphans.append(rel)
            if not dry_run:
                full.unlink()
    return orphans
