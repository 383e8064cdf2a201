"""The Delta commit primitives every write mode builds on.

- the app-transaction guard: `committed` (is batch `b` of app `a` in the table?) and
  `already_committed` (the same, logged, for a writer about to skip the batch);
- schema evolution (`evolve_schema`): new columns in a metadata-only commit first;
- the empty commit (`commit_empty`): a batch recorded without data, so the guard stays
  monotone (unless the target does not record empty batches: `record_empty`);
- the add-files commit (`append_files`, `commit_files`): files written by the caller,
  added in one commit carrying the batch's app transaction and commit info;
- `after_commit`: the crash point, the log line and automatic compaction of a
  committed batch (`nothing_written`: the log line of one that changed nothing).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, Schema
from deltalake.exceptions import DeltaError, TableNotFoundError
from deltalake.transaction import AddAction, create_table_with_add_actions

from streams.delta import schema as table_schema
from streams.delta.errors import DeltaWriteError
from streams.delta.faults import crash_point
from streams.delta.tables import open_table, storage_options
from streams.delta.target import (
    APP_KEY,
    BATCH_KEY,
    TABLE_CONFIGURATION,
    DeltaTarget,
    commit_properties,
    newest_recorded,
    recorded_value,
)

logger = logging.getLogger(__name__)

FileEntry = tuple[str, int, dict[str, str | None], str, int]
"""A data file written for a commit: `(path, size, partition values, stats json, mtime ms)`."""


def load_table(path: str) -> DeltaTable | None:
    """The table at `path`, or None when there is none yet."""
    try:
        return open_table(path)
    except TableNotFoundError:
        return None


class KeptTable:
    """A Delta table kept open with delta-rs between calls, for a writer that reads
    the table before each of its commits. Opening a table replays its log from the last
    checkpoint (up to `delta.checkpointInterval` - 1 commits, 20-40 ms at 100). A kept
    one looks for the commit file after its version, and only when there is one brings
    itself up to date (`update_incremental`: about two thirds of the time of an open,
    and a third of it with nothing new; docs/decisions/0010). It is
    opened again when the table at the path was replaced (its first commit file is
    another file than when it was opened), when it cannot be brought up to date, and
    always for a path that is not local, whose first commit is not stat'ed.

    One owner at a time: the caller serialises its calls (the delta-rs table is
    updated in place)."""

    def __init__(self, path: str) -> None:
        self.path = str(path)
        self._table: DeltaTable | None = None
        self._identity: tuple[int, int] | None = None
        local = "://" not in self.path or self.path.startswith("file://")
        self._first = (
            Path(self.path.removeprefix("file://")) / "_delta_log" / f"{0:020d}.json"
            if local
            else None
        )

    def get(self) -> DeltaTable | None:
        """The table at its newest version, or None when there is none yet."""
        table = self._current()
        if table is not None:
            if self._newest(table.version()) == table.version():
                return table  # no new commit: delta-rs's update would still read the log
            try:
                table.update_incremental()
                return table
            except DeltaError as e:
                logger.debug("reopening %s: %s", self.path, e)
        self.forget()
        identity = self._first_file()
        table = load_table(self.path)
        if table is not None and identity is not None:
            self._table, self._identity = table, identity
        return table

    def __getstate__(self) -> dict[str, Any]:
        # A copy sent to another process opens the table there.
        return {**self.__dict__, "_table": None, "_identity": None}

    def version(self) -> int | None:
        """The table's newest version, or None when there is none yet. A kept table
        counts the commit files after its own version (read on the next `get`)."""
        table = self._current()
        if table is not None:
            return self._newest(table.version())
        table = self.get()
        return None if table is None else table.version()

    def forget(self) -> None:
        """Open the table again on the next `get` (after a failed commit through it)."""
        self._table = self._identity = None

    def _current(self) -> DeltaTable | None:
        """The kept table while it is the table at the (local) path, else None."""
        table = self._table
        if table is not None and self._identity is not None:
            if self._first_file() == self._identity:
                return table
        return None

    def _newest(self, version: int) -> int:
        """The newest version of the kept local table from `version` on: Delta writes a
        version's commit file whole (by rename), one version after the other."""
        assert self._first is not None
        log = self._first.parent
        while (log / f"{version + 1:020d}.json").exists():
            version += 1
        return version

    def _first_file(self) -> tuple[int, int] | None:
        if self._first is None:
            return None
        try:
            st = self._first.stat()
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns


KEPT_TABLES = 256
"""The most tables `kept_table` keeps open in a process: the targets of its queries."""

_kept: dict[str, KeptTable] = {}
_kept_guard = threading.Lock()


_held = threading.local()
"""The tables each thread is inside a `kept_table` block of, by path."""


@contextmanager
def kept_table(path: str) -> Iterator[KeptTable]:
    """The table at `path` kept open in this process (`KeptTable`), the caller's alone
    for the block: a writer's batches each read the table before they write and its
    version after, and opening it for each read would replay its log since the last
    checkpoint. Inside a block, the same thread asking again for the path gets the same
    table, so the steps of one write share it without passing it along; a thread that
    asks while another holds the path's table gets one of its own (the newer returned
    is kept). After a failure in a block the table is opened again on its next use. The
    least recently used beyond `KEPT_TABLES` are closed."""
    key = str(path)
    held: dict[str, KeptTable] = _held.__dict__.setdefault("tables", {})
    outer = key not in held
    if outer:
        with _kept_guard:
            held[key] = _kept.pop(key, None) or KeptTable(key)
    kept = held[key]
    try:
        yield kept
    except BaseException:
        kept.forget()
        raise
    finally:
        if outer:
            del held[key]
            with _kept_guard:
                _kept[key] = kept
                while len(_kept) > KEPT_TABLES:
                    del _kept[next(iter(_kept))]


def current_table(path: str) -> DeltaTable:
    """The table at `path`, which exists, as it is now: read through `kept_table` (a step
    of a write, after the write created or changed it)."""
    with kept_table(path) as kept:
        table = kept.get()
    assert table is not None
    return table


def latest_version(path: str) -> int | None:
    """The table's newest version, read from its log by delta-rs (a Spark `history()` is
    a job per call for one number the log states), or None when there is no table."""
    table = load_table(path)
    return None if table is None else table.version()


def committed(target: DeltaTarget, batch_id: int) -> bool:
    """Whether `write_batch` would skip this batch: the table already has batch
    `batch_id` (or a later one) of `target.app_id`."""
    with kept_table(target.path) as kept:
        return _committed_at(kept.get(), target, batch_id) is not None


def already_committed(table: DeltaTable | None, target: DeltaTarget, batch_id: int) -> bool:
    """Whether the batch is in `table` already (and so skipped), logged."""
    done = _committed_at(table, target, batch_id)
    if done is not None:
        logger.info(
            "Delta table %s: batch %d of app `%s` already committed (as batch %d); skipping",
            target.name,
            batch_id,
            target.app_id,
            done,
        )
    return done is not None


_NEWEST_COMMITS = (8, 64)
"""How many of the table's newest commits `_last_recorded_batch` reads for the writer's
own, first and at most. Between a batch's commit and its replay only maintenance (an
OPTIMIZE, a VACUUM) or another writer commits to the table."""


def _committed_at(table: DeltaTable | None, target: DeltaTarget, batch_id: int) -> int | None:
    """The last batch of `target.app_id` in `table` when it covers `batch_id` (the batch is
    already in the table), else None. Two records tell: the app transaction (the Python
    engine's commits and the native engine's MERGEs carry one), and the batch in the
    commit info of the writer's newest commit (the native engine's appends carry no app
    transaction: delta-spark reads the table's whole state to check one,
    docs/architecture.md, "Exactly-once")."""
    if table is None:
        return None
    done = table.transaction_version(target.app_id)
    if done is None or done < batch_id:
        done = _last_recorded_batch(table, target.app_id)
    return done if done is not None and done >= batch_id else None


def _last_recorded_batch(table: DeltaTable, app_id: str) -> int | None:
    """The batch recorded by `app_id`'s newest commit among the table's newest
    `_NEWEST_COMMITS`, or None."""
    for info in newest_recorded(table, _NEWEST_COMMITS):
        if info.get(APP_KEY) == app_id and BATCH_KEY in info:
            return int(recorded_value(info[BATCH_KEY]))
    return None


def after_commit(target: DeltaTarget, batch_id: int, version: int | None) -> None:
    """After a batch's commit: the crash point, the log line, automatic compaction."""
    crash_point("after_commit")
    logger.info(
        "Delta table %s: batch %d of app `%s` committed as version %s",
        target.name,
        batch_id,
        target.app_id,
        version,
    )
    if target.optimize_every and version and version % target.optimize_every == 0:
        from streams.delta.maintenance import optimize

        optimize(target.path)


def nothing_written(target: DeltaTarget, batch_id: int, version: int | None) -> None:
    """The log line of a batch that changed nothing and was not recorded (`record_empty`)."""
    logger.info(
        "Delta table %s: batch %d of app `%s` changes nothing; the table stays at version %s",
        target.name,
        batch_id,
        target.app_id,
        version,
    )


def evolve_schema(table: DeltaTable, incoming: pa.Schema, target: DeltaTarget) -> DeltaTable:
    table_schema.check_partitioning(table, target.partition_by, path=target.path)
    added = table_schema.new_columns(table, incoming, path=target.path)
    if added:
        logger.info(
            "Delta table %s: adding columns %s", target.name, ", ".join(f.name for f in added)
        )
        # A metadata-only commit before the data commit: if we die in between, the
        # replayed batch finds the columns there and only appends.
        table.alter.add_columns(added)
        table = current_table(target.path)
    return table


def commit_empty(
    table: DeltaTable, batch_id: int, target: DeltaTarget, commit_info: Mapping[str, Any] | None
) -> int:
    """Record the batch in the app transaction without data, keeping the guard monotone;
    the table's version as it is when `target` does not record empty batches."""
    if not target.record_empty:
        return table.version()
    table.create_write_transaction(
        [],
        "append",
        table.schema(),
        partition_by=list(table.metadata().partition_columns) or None,
        commit_properties=commit_properties(target, batch_id, commit_info),
    )
    return _version(target)


def version_after_merge(
    target: DeltaTarget, batch_id: int, commit_info: Mapping[str, Any] | None
) -> int:
    """The table's version after a delta-rs MERGE of batch `batch_id`. delta-rs skips the
    commit of a MERGE that changed nothing (every change stale); the batch is then
    recorded with an empty commit, so that a replay stays a no-op."""
    table = current_table(target.path)
    if table.transaction_version(target.app_id) != batch_id:
        return commit_empty(table, batch_id, target, commit_info)
    return table.version()


def create_table(
    path: str,
    schema: pa.Schema,
    adds: list[AddAction],
    partition_by: list[str],
    props: Any = None,
) -> None:
    """Create the table at `path` (change data feed on) with `adds` as its version 0."""
    create_table_with_add_actions(
        path,
        Schema.from_arrow(schema),
        adds,
        mode="error",
        partition_by=partition_by or None,
        configuration=TABLE_CONFIGURATION,
        storage_options=storage_options(path),
        commit_properties=props,
    )


def prepare_append(
    table: DeltaTable | None, schema: pa.Schema, target: DeltaTarget
) -> tuple[DeltaTable | None, list[str]]:
    """The table with `schema`'s new columns added, and its partition columns."""
    if table is not None:
        table = evolve_schema(table, schema, target)
        partition_by = list(table.metadata().partition_columns)
    else:
        partition_by = list(target.partition_by)
    table_schema.check_columns(
        schema.names, partition_by, path=target.path, what="partition columns"
    )
    return table, partition_by


def commit_files(
    files: list[FileEntry],
    batch_id: int,
    target: DeltaTarget,
    table: DeltaTable | None,
    schema: pa.Schema,
    partition_by: list[str],
    commit_info: Mapping[str, Any] | None,
) -> int:
    """One Delta commit adding `files`, with the app transaction of `batch_id`."""
    adds = [
        AddAction(path, size, values, mtime, True, stats)
        for path, size, values, stats, mtime in files
    ]
    if not adds and table is not None and not target.record_empty:
        return table.version()
    crash_point("before_commit")
    props = commit_properties(target, batch_id, commit_info)
    try:
        if table is None:
            create_table(target.path, schema, adds, partition_by, props)
            return 0
        table.create_write_transaction(
            adds,
            "append",
            table.schema(),
            partition_by=partition_by or None,
            commit_properties=props,
        )
    except DeltaError as e:
        raise DeltaWriteError(
            f"Delta table `{target.path}`: committing batch {batch_id} "
            f"({len(adds)} files) failed: {e}",
            path=target.path,
            batch_id=batch_id,
        ) from e
    return _version(target)


def _version(target: DeltaTarget) -> int:
    """The target's newest version, after a commit to it."""
    with kept_table(target.path) as kept:
        version = kept.version()
    assert version is not None
    return version


def append_files(
    target: DeltaTarget,
    batch_id: int,
    schema: pa.Schema,
    write: Callable[[list[str]], list[FileEntry]],
    *,
    commit_info: Mapping[str, Any] | None = None,
) -> int | None:
    """Append, as batch `batch_id`, the files `write(partition_by)` writes under the
    table root (for a caller that writes its own files, e.g. `streams.landing`), with the
    guard, schema evolution, commit and crash points of `write_batch`. Returns the new
    version, or None when the batch is already committed (`write` is then not called)."""
    with kept_table(target.path) as kept:
        table = kept.get()
        if already_committed(table, target, batch_id):
            return None
        table, partition_by = prepare_append(table, schema, target)
        files = write(partition_by)
        version = commit_files(files, batch_id, target, table, schema, partition_by, commit_info)
    after_commit(target, batch_id, version)
    return version
