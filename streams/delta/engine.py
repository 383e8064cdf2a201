"""The two Delta engines behind one small interface, and the entry points that pick one.

- `PythonDelta` (pip-only): delta-rs commits (`streams.delta.sink`) and this package's
  Python data source (`streams.delta.source`);
- `NativeDelta`: Spark's own `delta` format with the delta-spark jars
  (`streams.delta.native`).

Both keep the contract of docs/architecture.md (idempotent commits carrying the
batch's app transaction and commit info), so a caller picks one with
`delta_engine(name)` and never branches on it. `write_batch` and `read_delta_stream`
are the entry points by engine name (`DeltaTarget.engine`, `engine=`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from pyspark.sql import DataFrame, SparkSession

from streams.delta import maintenance, native, native_maintenance, sink, source
from streams.delta.errors import DeltaConfigError
from streams.delta.target import DeltaTarget, Engine

Read = Literal["append", "changes"]


class DeltaEngine(Protocol):
    """What the runtime needs of a Delta engine, and what sets the engines apart
    (capabilities, as delta-rs and Spark's `SupportsXxx` mixins declare them)."""

    name: Engine
    commits_with_delta_rs: bool
    """Its commits are delta-rs's: files written in Arrow and committed by delta-rs (the
    Kafka landing path, `streams.landing`) are commits of its own wherever it runs, with
    the storage settings and table features it uses."""
    merge_reads_source_once: bool
    """An upsert's MERGE reads its source in one pass, so counts observed on the source
    while it is written are the batch's (delta-spark's MERGE runs several jobs over its
    source)."""

    def available(self, spark: SparkSession) -> bool:
        """Whether this engine can run on `spark`."""
        ...

    def write_batch(
        self,
        df: DataFrame,
        batch_id: int,
        target: DeltaTarget,
        *,
        commit_info: Mapping[str, Any] | None = None,
    ) -> int | None:
        """Write one micro-batch exactly once; the new version, or None if already in."""
        ...

    def read_stream(
        self,
        spark: SparkSession,
        path: str,
        *,
        read: Read,
        max_versions_per_trigger: int | None,
        commit_wait: float = 0.0,
        wake_file: str | None = None,
        watch_also: Sequence[str] = (),
    ) -> DataFrame:
        """The table's versions as a streaming DataFrame (`read_delta_stream`); a trigger
        that finds nothing new waits up to `commit_wait` seconds for the next commit
        where `waits_for_commits(path)`, or until `wake_file` is there, or one of the
        tables `watch_also` names commits."""
        ...

    def waits_for_commits(self, path: str) -> bool:
        """Whether its stream of `path` can wait in a trigger for the table's next commit
        (and start the batch when it lands) instead of asking again a polling delay later."""
        ...

    def read_snapshot(self, spark: SparkSession, path: str) -> DataFrame:
        """The table's latest version as a static DataFrame (stream-static joins)."""
        ...

    def optimize(self, spark: SparkSession | None, path: str) -> dict[str, Any]:
        """Compact the table's small files (no data change); the engine's metrics."""
        ...

    def vacuum(
        self, spark: SparkSession | None, path: str, retention_hours: int, *, force: bool = False
    ) -> list[str]:
        """Delete files unreferenced for more than `retention_hours`; the files deleted.
        A retention below the table's `delta.deletedFileRetentionDuration` is refused by
        Delta unless `force`."""
        ...


class PythonDelta:
    """delta-rs and the Python data source: runs wherever pip installed us."""

    name: Engine = "python"
    commits_with_delta_rs = True
    merge_reads_source_once = True

    def available(self, spark: SparkSession) -> bool:
        return True

    def write_batch(
        self,
        df: DataFrame,
        batch_id: int,
        target: DeltaTarget,
        *,
        commit_info: Mapping[str, Any] | None = None,
    ) -> int | None:
        return sink.write_python(df, batch_id, target, commit_info=commit_info)

    def read_stream(
        self,
        spark: SparkSession,
        path: str,
        *,
        read: Read,
        max_versions_per_trigger: int | None,
        commit_wait: float = 0.0,
        wake_file: str | None = None,
        watch_also: Sequence[str] = (),
    ) -> DataFrame:
        return source.read_python(
            spark,
            path,
            read=read,
            max_versions_per_trigger=max_versions_per_trigger,
            commit_wait=commit_wait,
            wake_file=wake_file,
            watch_also=watch_also,
        )

    def waits_for_commits(self, path: str) -> bool:
        return source.waits_for_commits(path)

    def read_snapshot(self, spark: SparkSession, path: str) -> DataFrame:
        return source.read_snapshot_python(spark, path)

    def optimize(self, spark: SparkSession | None, path: str) -> dict[str, Any]:
        return maintenance.optimize(path)

    def vacuum(
        self, spark: SparkSession | None, path: str, retention_hours: int, *, force: bool = False
    ) -> list[str]:
        return maintenance.vacuum(path, retention_hours=retention_hours, force=force)


class NativeDelta:
    """Spark's `delta` format: needs delta-spark on the session's class path."""

    name: Engine = "native"
    commits_with_delta_rs = False
    merge_reads_source_once = False

    def available(self, spark: SparkSession) -> bool:
        return native.native_delta_available(spark)

    def write_batch(
        self,
        df: DataFrame,
        batch_id: int,
        target: DeltaTarget,
        *,
        commit_info: Mapping[str, Any] | None = None,
    ) -> int | None:
        return native.write_batch_native(df, batch_id, target, commit_info=commit_info)

    def read_stream(
        self,
        spark: SparkSession,
        path: str,
        *,
        read: Read,
        max_versions_per_trigger: int | None,
        commit_wait: float = 0.0,
        wake_file: str | None = None,
        watch_also: Sequence[str] = (),
    ) -> DataFrame:
        # Delta's own source cannot wait for a commit (`waits_for_commits`): Spark polls it.
        return native.read_delta_stream_native(
            spark, path, read=read, max_versions_per_trigger=max_versions_per_trigger
        )

    def waits_for_commits(self, path: str) -> bool:
        return False

    def read_snapshot(self, spark: SparkSession, path: str) -> DataFrame:
        return native.read_snapshot_native(spark, path)

    def optimize(self, spark: SparkSession | None, path: str) -> dict[str, Any]:
        return native_maintenance.optimize_native(_session(spark), path)

    def vacuum(
        self, spark: SparkSession | None, path: str, retention_hours: int, *, force: bool = False
    ) -> list[str]:
        return native_maintenance.vacuum_native(_session(spark), path, retention_hours, force=force)


def _session(spark: SparkSession | None) -> SparkSession:
    if spark is None:
        raise DeltaConfigError(
            "The native Delta engine needs a SparkSession with delta-spark; pass one, "
            "or use the `python` engine.",
            option="engine",
        )
    return spark


_ENGINES: dict[str, DeltaEngine] = {"python": PythonDelta(), "native": NativeDelta()}


def delta_engine(name: str) -> DeltaEngine:
    """The engine called `name` (`python` or `native`)."""
    try:
        return _ENGINES[name]
    except KeyError:
        raise DeltaConfigError(
            f"Delta engine `{name}` is not an engine; use `python` or `native`.",
            option="engine",
        ) from None


def write_batch(
    df: DataFrame,
    batch_id: int,
    target: DeltaTarget,
    *,
    commit_info: Mapping[str, Any] | None = None,
) -> int | None:
    """Write one micro-batch with `target.engine`; return the new table version, or None
    if already committed. Called from `foreachBatch(fn(batch_df, batch_id))` on the driver."""
    return delta_engine(target.engine).write_batch(df, batch_id, target, commit_info=commit_info)


def read_delta_stream(
    spark: SparkSession,
    path: str,
    *,
    read: Read = "append",
    max_versions_per_trigger: int | None = None,
    engine: Engine = "python",
    commit_wait: float = 0.0,
    wake_file: str | None = None,
    watch_also: Sequence[str] = (),
) -> DataFrame:
    """A streaming DataFrame over the versions of the Delta table at `path`
    (`streams.delta.source` tells what a version yields). `commit_wait`: seconds a trigger
    that finds nothing new may wait for the next commit, on an engine whose source
    `waits_for_commits` (0: none waits); `wake_file`: a local file whose appearance ends
    such a wait at once (a stop creates it); `watch_also`: the other tables the query
    reads as streams, whose new commits end such a wait too (each `waits_for_commits`)."""
    path = str(path)
    if read not in ("append", "changes"):
        raise DeltaConfigError(
            f"Delta stream `{path}`: read `{read}` is not `append` or `changes`",
            path=path,
            option="read",
        )
    if max_versions_per_trigger is not None and max_versions_per_trigger < 1:
        raise DeltaConfigError(
            f"Delta stream `{path}`: `max_versions_per_trigger` must be at least 1 "
            f"(got `{max_versions_per_trigger}`)",
            path=path,
            option="max_versions_per_trigger",
        )
    # Any engine name but `native` reads with the python engine, as it always has.
    chosen = delta_engine("native" if engine == "native" else "python")
    if commit_wait < 0:
        raise DeltaConfigError(
            f"Delta stream `{path}`: `commit_wait` must be 0 or more seconds (got `{commit_wait}`)",
            path=path,
            option="commit_wait",
        )
    return chosen.read_stream(
        spark,
        path,
        read=read,
        max_versions_per_trigger=max_versions_per_trigger,
        commit_wait=commit_wait,
        wake_file=wake_file,
        watch_also=watch_also,
    )
