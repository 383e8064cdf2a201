"""A Delta table as a stream of its versions: the python engine's data source
(`read_delta_stream` in `streams.delta.engine` picks the engine).

Offsets are `{"version": v, "table": id}`: the last table version a batch includes,
and the table's id (Delta's `metaData.id`, new for a table re-created at the path); a
new query starts at `{"version": -1, ...}` ("before version 0") and so replays the
table from its first version, which gives a downstream every row exactly once (no snapshot step:
a snapshot followed by changes would need a second offset kind for no gain on
tables a streaming sink built). Consequence: a new downstream of a table whose old
files were vacuumed cannot start from scratch; it fails naming the missing file. A
position in a table since replaced (`warehouse reset`, or deleted and written again)
names nothing in the new one: the query fails (`TABLE_REPLACED` in its message), as
delta-spark's source does (DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE). Offsets
without `table` (written before it was recorded) are not checked.

`read="append"` yields the rows each version added (add actions with
`dataChange=true`; compaction commits are skipped). A version that removes rows
(MERGE, DELETE, overwrite) stops the query with an error saying to use
`read="changes"`: replaying rewritten files would repeat rows. `read="changes"`
yields the change data feed (`load_cdf`) with `_change_type` (insert,
update_preimage, update_postimage, delete), `_commit_version`, `_commit_timestamp`.

In a continuous query the reader of a local table can wait for the next commit
(`commit_wait_ms`): a trigger that finds nothing new watches the log folder for the next
commit file (`LogWatch`) and answers as soon as it is there, or with nothing new once
the wait is over. The query then starts its batch as the upstream commits, where Spark's
polling alone starts it up to `spark.sql.streaming.pollingDelay` later, and an idle
query's triggers come a wait apart. A stop of the query waits for the trigger: with
`wake_file` (a local path) the wait ends as soon as that file is there, which the stop
creates first (docs/decisions/0072, 0079). With `watch_also` (the other local tables a
query joins as streams) the wait ends too when one of their logs has a new entry, so
that the query's other sources, which Spark asks in the same trigger, are not held back
(`LogWatch.others`, docs/decisions/0081).

Work is split per file (append) or per version (changes) so executors read in
parallel. The reader reads the JSON commits in `_delta_log/` and the data files through
`streams.storage`: local tables and tables on object storage alike.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from typing import Any, Literal
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

import streams.storage as storage
from streams._datasources import register_once
from streams._worker_gc import freeze_imports
from streams.delta.arrow import read_table
from streams.delta.commit import KeptTable, kept_table
from streams.delta.errors import DeltaConfigError, DeltaReadError, DeltaTableNotFoundError
from streams.delta.log_watch import LogWatch
from streams.delta.schema import normalize_arrow
from streams.delta.tables import log_file, open_table

logger = logging.getLogger(__name__)

FORMAT_NAME = "warehouse_delta"
CHANGE_COLUMNS = StructType(
    [
        StructField("_change_type", StringType()),
        StructField("_commit_version", LongType()),
        StructField("_commit_timestamp", TimestampType()),
    ]
)
_TARGET_PARTITION_BYTES = 64 << 20


def _table_schema(path: str, read: str) -> StructType:
    try:
        dt = open_table(path)
    except TableNotFoundError as e:
        raise DeltaTableNotFoundError(
            f"Cannot stream from `{path}`: there is no Delta table there yet. Run the "
            "upstream table first (`warehouse run --table <upstream>`) so it exists.",
            path=path,
        ) from e
    schema = from_arrow_schema(
        normalize_arrow(pa.schema(dt.schema().to_arrow())), prefer_timestamp_ntz=False
    )
    if read == "changes":
        schema = StructType([*schema.fields, *CHANGE_COLUMNS.fields])
    return schema


class _Files(InputPartition):
    def __init__(self, files: list[tuple[int, str, dict[str, str | None]]]) -> None:
        self.files = files


class _Version(InputPartition):
    def __init__(self, version: int) -> None:
        self.version = version


def _conform(
    table: pa.Table, schema: pa.Schema, constants: dict[str, str | None] | None = None
) -> Iterator[pa.RecordBatch]:
    """Cast `table` to the plan-time schema: missing columns null, new ones dropped."""
    n = table.num_rows
    if n == 0:
        return
    arrays = []
    for f in schema:
        if constants is not None and f.name in constants:
            arrays.append(pa.array([constants[f.name]] * n, pa.string()).cast(f.type))
        elif f.name in table.column_names:
            arrays.append(table.column(f.name).cast(f.type))
        else:
            arrays.append(pa.nulls(n, f.type))
    yield from pa.Table.from_arrays(arrays, schema=schema).to_batches()


TABLE_REPLACED = "was replaced since this stream last read it"
"""The words of the error a stream reading a replaced table fails with."""


class DeltaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Reads versions (start, end] of one table; runs in Spark's driver-side Python
    worker (offsets, planning) and in executors (`read`), which get a pickled copy."""

    def __init__(
        self,
        path: str,
        read: str,
        max_versions: int | None,
        schema: StructType,
        *,
        commit_wait: float = 0.0,
        wake_file: str | None = None,
        watch_also: Sequence[str] = (),
    ) -> None:
        self.path = path
        self.mode = read
        self.max_versions = max_versions
        # Only a local log is watched: on object storage each look would be a request.
        local = storage.local_path(path)
        self._log = (
            LogWatch(
                os.path.join(local, "_delta_log"),
                wake=wake_file,
                others=[_log_folder(p) for p in watch_also],
            )
            if local and commit_wait
            else None
        )
        self._commit_wait = commit_wait
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self._until: int | None = None
        # Spark asks for the latest offset at every trigger, also of an idle query: the
        # table kept open reads only the commits since the last time.
        self._kept = KeptTable(path)
        # The table's newest version the last `latestOffset` saw, for the
        # `reportLatestOffset` that Spark calls right after it (None once reported).
        self._seen: dict | None = None

    def _table(self) -> DeltaTable:
        table = self._kept.get()
        return table if table is not None else open_table(self.path)  # raises: no table

    def _latest(self) -> int:
        return self._table().version()

    def _table_id(self) -> str:
        return str(self._table().metadata().id)

    def initialOffset(self) -> dict:
        return {"version": -1, "table": self._table_id()}

    def getDefaultReadLimit(self) -> ReadLimit:
        # Built-in limits only: "files" stands for versions here.
        return ReadMaxFiles(self.max_versions) if self.max_versions else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._until = self._latest()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = int(start["version"])
        if self._log is not None and self._until is None:
            self._log.wait_for(f"{begin + 1:020d}.json", self._commit_wait)
        table = self._table()
        latest = table.version() if self._until is None else self._until
        current = str(table.metadata().id)
        if start.get("table", current) != current:
            raise DeltaReadError(
                f"Delta table `{self.path}` {TABLE_REPLACED}: the checkpoint's position "
                f"(version {begin}) is in table id {start['table']}, and the table at this "
                f"path is now id {current} (reset, or deleted and written again). Its reader "
                "starts over from the new table once its own checkpoint is reset.",
                path=self.path,
                version=begin,
            )
        end = latest
        if isinstance(limit, ReadMaxFiles):
            end = min(latest, begin + max(1, limit.max_files))
        self._seen = {"version": table.version(), "table": current}
        return {"version": max(begin, end), "table": current}

    def reportLatestOffset(self) -> dict | None:
        # Spark asks right after `latestOffset`, at every trigger, an idle query's too:
        # the version that call saw is this trigger's (docs/decisions/0057).
        if self._seen is not None:
            seen, self._seen = self._seen, None
            return seen
        table = self._table()
        return {"version": table.version(), "table": str(table.metadata().id)}

    def _commit_actions(self, version: int) -> list[dict[str, Any]]:
        text = storage.read_text(log_file(self.path, version))
        if text is None:
            raise DeltaReadError(
                f"Cannot stream version {version} of `{self.path}`: its commit file is gone "
                "(log cleaned up). Reset the downstream table to start it again.",
                path=self.path,
                version=version,
            )
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        first, last = int(start["version"]) + 1, int(end["version"])
        if self.mode == "changes":
            return [_Version(v) for v in range(first, last + 1)]
        groups: list[_Files] = []
        size = 0
        for v in range(first, last + 1):
            actions = self._commit_actions(v)
            op = next(
                (a["commitInfo"].get("operation") for a in actions if "commitInfo" in a), None
            )
            for a in actions:
                rm = a.get("remove")
                if rm is not None and rm.get("dataChange", True):
                    raise DeltaReadError(
                        f"Version {v} of `{self.path}` ({op}) rewrites or deletes rows; "
                        "`read: append` streams only append-only tables. Use `read: changes` "
                        "to stream its change feed.",
                        path=self.path,
                        version=v,
                    )
            for a in actions:
                add = a.get("add")
                if add is None or not add.get("dataChange", True):
                    continue
                if add.get("deletionVector"):
                    raise DeltaReadError(
                        f"Version {v} of `{self.path}` uses deletion vectors, which the "
                        "python engine cannot read; use engine `native`.",
                        path=self.path,
                        version=v,
                    )
                if not groups or size + int(add.get("size", 0)) > _TARGET_PARTITION_BYTES:
                    groups.append(_Files([]))
                    size = 0
                groups[-1].files.append((v, add["path"], add.get("partitionValues") or {}))
                size += int(add.get("size", 0))
        return groups

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        freeze_imports()
        if isinstance(partition, _Version):
            # The worker keeps the table open between tasks (`kept_table`): each batch of
            # a change feed then reads the commits since the last, not the whole log.
            with kept_table(self.path) as kept:
                dt = kept.get()
                if dt is None or dt.version() < partition.version:
                    raise DeltaReadError(
                        f"Delta table `{self.path}`: version {partition.version} of its change "
                        "feed was planned but the table is gone or older; restart the query.",
                        path=self.path,
                        version=partition.version,
                    )
                cdf = pa.table(
                    dt.load_cdf(
                        starting_version=partition.version, ending_version=partition.version
                    )
                )
            yield from _conform(cdf, self.arrow_schema)
            return
        assert isinstance(partition, _Files)
        for version, rel, values in partition.files:
            fs, full = storage.current().filesystem(storage.join(self.path, unquote(rel)))
            try:
                data = pq.read_table(full, filesystem=fs)
            except FileNotFoundError as e:
                raise DeltaReadError(
                    f"File `{rel}` of version {version} of `{self.path}` is gone (vacuumed?). "
                    "The stream is further behind than the table's vacuum retention; "
                    "reset the downstream table to start it again.",
                    path=self.path,
                    version=version,
                ) from e
            yield from _conform(data, self.arrow_schema, values)


class DeltaSnapshotReader(DataSourceReader):
    """The table's latest version, read anew by every execution of the plan: the static
    side of a stream-static join sees what the table holds at each micro-batch, as
    delta-spark's does.

    Spark plans a Python source's partitions once per query, so the files cannot be
    listed then: one partition reads whatever version is the latest when it runs (the
    dimension tables such joins read are small)."""

    def __init__(self, path: str, schema: StructType) -> None:
        self.path = path
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        freeze_imports()
        yield from _conform(read_table(self.path), self.arrow_schema)


class DeltaStreamDataSource(DataSource):
    """`spark.readStream.format("warehouse_delta").option("path", ...)`; options `read`
    (append|changes), `max_versions_per_trigger`, `commit_wait_ms` (default 0: a
    trigger does not wait), `wake_file` (a local file whose appearance ends a wait) and
    `watch_also` (a JSON list of the other local tables whose new commits end a wait).
    `spark.read` of the same format
    gives the table's latest version at each execution (`DeltaSnapshotReader`)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def _opts(self) -> tuple[str, str, int | None]:
        path = self.options.get("path")
        if not path:
            raise DeltaConfigError(
                "the `warehouse_delta` source needs a `path` option", option="path"
            )
        read = self.options.get("read", "append")
        mv = self.options.get("max_versions_per_trigger")
        return path, read, int(mv) if mv else None

    def _commit_wait(self) -> float:
        text = self.options.get("commit_wait_ms", "0")
        try:
            wait = int(text)
        except ValueError:
            wait = -1
        if wait < 0:
            raise DeltaConfigError(
                f"`warehouse_delta` option `commit_wait_ms` must be a whole number of "
                f"milliseconds, 0 or more (got `{text}`)",
                option="commit_wait_ms",
            )
        return wait / 1000

    def schema(self) -> StructType:
        path, read, _ = self._opts()
        return _table_schema(path, read)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        path, read, mv = self._opts()
        return DeltaStreamReader(
            path,
            read,
            mv,
            schema,
            commit_wait=self._commit_wait(),
            wake_file=self.options.get("wake_file") or None,
            watch_also=json.loads(self.options.get("watch_also") or "[]"),
        )

    def reader(self, schema: StructType) -> DataSourceReader:
        path, read, _ = self._opts()
        if read != "append":
            raise DeltaConfigError(
                f"`{path}`: a batch read of `warehouse_delta` gives the latest version; "
                f"`read: {read}` is for streams",
                option="read",
            )
        return DeltaSnapshotReader(path, schema)


def read_python(
    spark: SparkSession,
    path: str,
    *,
    read: Literal["append", "changes"] = "append",
    max_versions_per_trigger: int | None = None,
    commit_wait: float = 0.0,
    wake_file: str | None = None,
    watch_also: Sequence[str] = (),
) -> DataFrame:
    """`read_delta_stream` on the python engine: this module's data source over `path`."""
    path = _registered(spark, path, read)
    reader = spark.readStream.format(FORMAT_NAME).option("path", path).option("read", read)
    if max_versions_per_trigger:
        reader = reader.option("max_versions_per_trigger", str(max_versions_per_trigger))
    if commit_wait > 0:
        reader = reader.option("commit_wait_ms", str(round(commit_wait * 1000)))
        if wake_file:
            reader = reader.option("wake_file", wake_file)
        if watch_also:
            reader = reader.option("watch_also", json.dumps([str(p) for p in watch_also]))
    return reader.load()


def _log_folder(path: str) -> str:
    local = storage.local_path(path)
    if local is None:
        raise DeltaConfigError(
            f"`watch_also` names `{path}`, which is not a local table: only a local log "
            "can be watched",
            path=path,
            option="watch_also",
        )
    return os.path.join(local, "_delta_log")


def waits_for_commits(path: str) -> bool:
    """Whether this module's reader of `path` can wait for its next commit: a local log."""
    return storage.local_path(path) is not None


def read_snapshot_python(spark: SparkSession, path: str) -> DataFrame:
    """The latest version of `path` as a static DataFrame whose every execution reads the
    version that is the latest then (the python engine's stream-static joins)."""
    path = _registered(spark, path, "append")
    return spark.read.format(FORMAT_NAME).option("path", path).load()


def _registered(spark: SparkSession, path: str, read: str) -> str:
    """`path` made absolute, once it is known to hold a Delta table (failing here, naming
    the path, not deep inside Spark), with this module's data source registered."""
    path = storage.resolve(path, os.getcwd())
    _table_schema(path, read)
    register_once(spark, DeltaStreamDataSource)
    return path
