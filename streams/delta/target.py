"""`DeltaTarget`: where and how one table's batches are written."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from deltalake import CommitProperties, DeltaTable, Transaction

from streams.delta.errors import DeltaConfigError

SinkMode = Literal["append", "upsert", "scd2"]
Engine = Literal["python", "native"]

CHECKPOINT_INTERVAL = 100
"""Commits between two checkpoints of a table's log (`delta.checkpointInterval`)."""

TABLE_CONFIGURATION: dict[str, str | None] = {
    "delta.enableChangeDataFeed": "true",
    "delta.checkpointInterval": str(CHECKPOINT_INTERVAL),
}
"""The properties of every table either engine creates.

- The change data feed is on, so `read: changes` works downstream.
- The log is checkpointed every `CHECKPOINT_INTERVAL` commits, delta-rs's default, not
  every 10, delta-spark's. A checkpoint is written by the commit that reaches it, inside
  its batch: on a native append of a few rows it ran 6 Spark jobs and cost ten times the
  JVM CPU of an append without one, half of a small-append table's JVM CPU every 10
  commits (docs/benchmarks.md, "Native engine: the log's checkpoints"). Readers that
  open the table from its last checkpoint replay up to 99 commits instead of 9.
"""

DEFAULT_TOMBSTONE_RETENTION_S = 7 * 24 * 3600.0
"""How long an upsert sink with `sequence_by` remembers a deleted key (streams.delta.tombstones)."""

INTERNAL_COLUMNS: tuple[str, ...] = ("_op", "_deleted")
"""Change-marker columns an upsert consumes and does not store (a delete marker is not data)."""

# Keys of the commit info every batch's commit records (`commit_properties`, the native
# engine's `userMetadata`).
OFFSETS_KEY = "warehouse.sourceOffsets"
START_KEY = "warehouse.startOffsets"
BATCH_KEY = "warehouse.batchId"
TABLE_KEY = "warehouse.table"
APP_KEY = "warehouse.appId"


@dataclass(frozen=True)
class DeltaTarget:
    """One Delta table written by one streaming query.

    `app_id` identifies the writer in the Delta log's app transactions; the runtime
    uses `"<table>:<checkpoint query id>"`, stable across restarts of one checkpoint.
    `optimize_every`: compact small files after every N-th table version written
    by this sink (None: never automatically). `unique_columns`: columns whose values
    are all or nearly all distinct, such as Kafka offsets; their Parquet column chunks
    are written without a dictionary, which for them costs time and saves no space.
    `tombstone_retention`: seconds an upsert sink with `sequence_by` remembers a deleted
    key, so an older change arriving later does not bring it back
    (`streams.delta.tombstones`). `record_empty`: whether a batch that changes nothing
    in an existing table is committed as an empty version (its commit info then
    records the batch's source offsets, which `warehouse recover` reads). Off, the table
    stays at its version and the write returns it: a query reading the table as a
    stream would otherwise run a batch for every such version. `one_change_per_key`: the
    writer knows each batch holds at most one row per key (an aggregate grouped by the
    keys): the python engine then collects an upsert batch as it is and checks that on
    the driver, instead of deduping it in Spark (`streams.delta.changes`).
    """

    path: str
    mode: SinkMode = "append"
    keys: Sequence[str] = ()
    sequence_by: str | None = None
    partition_by: Sequence[str] = ()
    app_id: str = ""
    engine: Engine = "python"
    optimize_every: int | None = None
    table: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    unique_columns: Sequence[str] = ()
    tombstone_retention: float = DEFAULT_TOMBSTONE_RETENTION_S
    record_empty: bool = True
    one_change_per_key: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", str(self.path))
        object.__setattr__(self, "unique_columns", tuple(self.unique_columns))
        object.__setattr__(self, "keys", tuple(self.keys))
        object.__setattr__(self, "partition_by", tuple(self.partition_by))
        if not self.app_id:
            raise DeltaConfigError(
                f"Delta target `{self.path}`: `app_id` is empty; give a stable id of the "
                "query and table, e.g. `<table>:<checkpoint query id>`",
                path=self.path,
                option="app_id",
            )
        if self.mode not in ("append", "upsert", "scd2"):
            raise DeltaConfigError(
                f"Delta target `{self.path}`: mode `{self.mode}` is not one of "
                "`append`, `upsert`, `scd2`",
                path=self.path,
                option="mode",
            )
        if self.mode in ("upsert", "scd2") and not self.keys:
            raise DeltaConfigError(
                f"Delta target `{self.path}`: mode `{self.mode}` needs `keys` "
                "(the columns that identify a row)",
                path=self.path,
                option="keys",
            )
        if self.mode == "scd2" and not self.sequence_by:
            raise DeltaConfigError(
                f"Delta target `{self.path}`: mode `scd2` needs `sequence_by` "
                "(the column that orders the changes of a key)",
                path=self.path,
                option="sequence_by",
            )
        if self.engine not in ("python", "native"):
            raise DeltaConfigError(
                f"Delta target `{self.path}`: engine `{self.engine}` is not `python` or `native`",
                path=self.path,
                option="engine",
            )
        if not self.tombstone_retention > 0:
            raise DeltaConfigError(
                f"Delta target `{self.path}`: `tombstone_retention` must be a positive "
                f"number of seconds (got `{self.tombstone_retention}`)",
                path=self.path,
                option="tombstone_retention",
            )
        if self.optimize_every is not None and self.optimize_every < 1:
            raise DeltaConfigError(
                f"Delta target `{self.path}`: `optimize_every` must be at least 1 "
                f"(got `{self.optimize_every}`)",
                path=self.path,
                option="optimize_every",
            )

    @property
    def name(self) -> str:
        """The table name for messages: `table` if given, else the path."""
        return self.table or self.path


def commit_properties(
    target: DeltaTarget, batch_id: int, commit_info: Mapping[str, Any] | None
) -> CommitProperties:
    """The app transaction `(app_id, batch_id)` and custom commit info of one batch's commit.

    Values that are not strings are stored as JSON text, so readers of the commit
    info (`recorded_offsets`) parse one format whatever the writer passed.
    """
    custom = {
        k: v if isinstance(v, str) else json.dumps(v, sort_keys=True)
        for k, v in batch_commit_info(target, batch_id, commit_info).items()
    }
    return CommitProperties(
        app_transactions=[Transaction(target.app_id, int(batch_id))],
        custom_metadata=custom,
    )


def batch_commit_info(
    target: DeltaTarget, batch_id: int, commit_info: Mapping[str, Any] | None
) -> dict[str, Any]:
    """`commit_info` with the writer and the batch added: both engines record them in
    every batch's commit, so a replay is recognised from the log's newest commit
    (`streams.delta.commit.committed`) whether or not the commit has an app transaction."""
    return {**(commit_info or {}), APP_KEY: target.app_id, BATCH_KEY: int(batch_id)}


def recorded_info(commit: Mapping[str, Any]) -> dict[str, Any]:
    """A commit's info (an entry of delta-rs `history()`) as the sink wrote it: delta-rs
    keeps its keys top level; the native engine stores them as JSON in `userMetadata`."""
    meta = commit.get("userMetadata")
    if isinstance(meta, str) and meta.startswith("{"):
        try:
            return {**json.loads(meta), **commit}
        except json.JSONDecodeError:
            return dict(commit)
    return dict(commit)


def newest_recorded(table: DeltaTable, windows: Iterable[int]) -> Iterator[dict[str, Any]]:
    """The recorded info (`recorded_info`) of the table's commits, newest first, read
    from the log in growing windows: the newest `windows[0]` commits, then those up to
    the next window's size, ...; the iteration ends at the table's first commit or
    after the last window. A caller that stops early reads only the windows it needed."""
    read = 0
    for limit in windows:
        history = table.history(limit)
        for commit in history[read:]:
            yield recorded_info(commit)
        if len(history) < limit:
            return
        read = len(history)


def recorded_value(value: Any) -> Any:
    """A commit-info value as written: non-string values are stored as JSON text."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value
