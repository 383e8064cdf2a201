"""Build one table's Structured Streaming query (docs/architecture.md "How a table runs").

No Spark import at module import time: pyspark is imported inside functions.
`build_query` returns a `CompiledQuery` whose `start()` starts the query; the
per-batch work (parse, transform, checks, idempotent Delta writes) is the
`foreachBatch` function the caller passes in (`warehouse.runtime.writer.BatchWriter`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from warehouse.compile.errors import CompileError
from warehouse.compile.operators import stateful, with_watermark
from warehouse.compile.plan import TablePlan, plan_table
from warehouse.compile.transform import apply_transform
from warehouse.spec.expectations import interval_seconds
from warehouse.spec.paths import checkpoint_is_new, recover_file, table_exists

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

    from warehouse.spec.model import LoadedProject
    from warehouse.spec.table import TableDefinition

logger = logging.getLogger(__name__)


class ForeachBatch(Protocol):
    """What `foreachBatch` calls with each micro-batch."""

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None: ...


B = TypeVar("B", bound=ForeachBatch)
BatchFactory = Callable[[TablePlan, dict[str, str], "TableDefinition"], B]
"""Makes a table's foreachBatch function from its plan, its registered views and its
definition as the query reads it (`payload_ddl` filled in from the records' Connect
schema for `connect_schema` tables)."""


NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"


@dataclass
class KeptSnapshot:
    """One table a `SnapshotCache` keeps: its path, the DataFrame whose copy is cached,
    and the table's version when that copy was read (the copy holds it or a newer one).
    `users`: the caches sharing it (`kept_snapshot`)."""

    path: str
    frame: DataFrame
    version: int | None = None
    users: int = 0
    key: tuple[int, str, str] | None = None
    """Its place in the session's shared snapshots (`kept_snapshot`), if there."""


_KEPT: dict[tuple[int, str, str], KeptSnapshot] = {}
_KEPT_LOCK = threading.Lock()


def kept_snapshot(spark: SparkSession, path: str, *, engine: str) -> KeptSnapshot:
    """The snapshot of `path` that the queries of this session keep, shared: Spark caches
    by plan, so two copies of one table would be one entry, and a query that read its
    copy again or stopped would drop the other's. A `SnapshotCache` counts itself among
    its users; the last to release it unpersists it."""
    key = (id(spark), engine, path)
    with _KEPT_LOCK:
        k = _KEPT.get(key)
        if k is None:
            frame = read_snapshot(spark, path, engine=engine)
            k = _KEPT[key] = KeptSnapshot(path, frame, key=key)
        return k


def _release_kept(k: KeptSnapshot) -> None:
    with _KEPT_LOCK:
        k.users -= 1
        if k.users > 0:
            return
        if k.key is not None and _KEPT.get(k.key) is k:
            del _KEPT[k.key]
    k.frame.unpersist(blocking=False)


class SnapshotCache:
    """The tables a table's SQL reads as snapshots, held in Spark's cache
    (`snapshots: {max_age: ...}`; docs/architecture.md, "Snapshots").

    Spark's cache manager puts a cached copy in place of every read of the same table in
    a plan, the streaming query's included, so a batch plans no Delta log read and no
    state rebuild of a new version. Once the copies are older than `max_age` seconds,
    `refresh` reads each table's version from its log and reads again the copy of each
    that has a newer one: the same DataFrame unpersisted and persisted again, so the
    streaming plan, which holds that DataFrame's plan, finds the new copy. A batch
    therefore joins a copy at most `max_age` behind its table. On the native engine a
    write to one of the tables through this session (delta-spark's commands) also
    refreshes its copy: Spark caches again every plan that reads what it writes."""

    def __init__(
        self,
        table: str,
        kept: dict[str, KeptSnapshot],
        max_age: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.table = table
        self.kept = kept
        self.max_age = max_age
        self._clock = clock
        self.read_at = clock()
        for k in kept.values():
            with _KEPT_LOCK:
                k.users += 1
                first = k.users == 1
            if first:  # else shared: another query keeps it already
                self._read(k)

    @staticmethod
    def _read(k: KeptSnapshot) -> None:
        from streams.delta import latest_version

        k.version = latest_version(k.path)  # before the copy: it holds this or newer
        k.frame.unpersist(blocking=False)
        k.frame.persist()

    def refresh(self) -> list[str]:
        """Once the copies are older than `max_age`, read again those whose table has a
        newer version; the tables read again. A read that fails is logged and tried
        again after another `max_age`; the batches then read the table themselves, and
        fail if they cannot either."""
        now = self._clock()
        if now - self.read_at < self.max_age:
            return []
        from streams.delta import latest_version

        self.read_at = now
        read = []
        for name, k in self.kept.items():
            try:
                if k.version is not None and latest_version(k.path) == k.version:
                    continue  # the copy is the newest version
                self._read(k)
                read.append(name)
            except Exception as e:  # noqa: BLE001 - the next batch reads it and reports
                logger.warning(
                    "table %s: could not read snapshot `%s` again: %s", self.table, name, e
                )
        if read:
            logger.debug("table %s: snapshots %s read again", self.table, ", ".join(read))
        return read

    def release(self) -> None:
        """Let go of the copies (the query has stopped); one no other query keeps is
        dropped from Spark's cache."""
        for k in self.kept.values():
            _release_kept(k)


@dataclass
class CompiledQuery(Generic[B]):
    """A table's query, ready to start; `batch` is its foreachBatch function.

    `no_data_batches`: whether Spark runs a batch without new input when the watermark
    moves. Such a batch only evicts state, and emits rows only in append mode for an
    aggregate (a window the watermark closed), an outer stream-stream join (its unmatched
    rows) or state with timeouts (`emits_without_data`); `build_query` turns it off for
    every other query, inner stream-stream joins included, where it would be
    a whole extra micro-batch (jobs, a Delta read, our writer) after each one with data.
    Eviction then happens in the next batch with data."""

    plan: TablePlan
    writer: DataStreamWriter
    batch: B
    views: list[str]
    no_data_batches: bool = True
    snapshots: SnapshotCache | None = None

    def refresh_snapshots(self) -> None:
        """Read the snapshots the table keeps again once older than their `max_age`
        (the runner calls it while the query runs); nothing without `snapshots`."""
        if self.snapshots is not None:
            self.snapshots.refresh()

    def release_snapshots(self) -> None:
        if self.snapshots is not None:
            self.snapshots.release()

    def start(self) -> StreamingQuery:
        from streams.delta import remove_interrupted_writes

        logger.info(
            "table %s: starting query (checkpoint %s)", self.plan.name, self.plan.checkpoint_path
        )
        remove_interrupted_writes(self.plan.checkpoint_path)
        if self.no_data_batches:
            return self.writer.start()
        # The query reads its settings from a copy of the session made by start():
        # set for this start only (the runner starts one query at a time).
        conf = self.writer._spark.conf
        before = conf.get(NO_DATA_BATCHES, "true")
        conf.set(NO_DATA_BATCHES, "false")
        try:
            return self.writer.start()
        finally:
            conf.set(NO_DATA_BATCHES, before)


def emits_without_data(df: DataFrame, defn: TableDefinition, output_mode: str) -> bool:
    """Whether a batch without input can emit rows for this query (see `CompiledQuery`):
    append output with an aggregate (a window the watermark closed), state with timeouts,
    or an outer or anti join of streams (`join_streams`: the rows the watermark leaves
    unmatched; a join with a snapshot keeps no state). An inner join of streams emits
    only when a new row meets a kept one. A plan Spark does not let us inspect counts as
    emitting."""
    if output_mode != "append":
        return False
    if defn.spec.aggregate:
        return True
    try:
        plan = df._jdf.queryExecution().analyzed().toString()  # no public API for the plan
    except Exception:  # noqa: BLE001 - Spark Connect has no JVM plan: keep Spark's default
        return True
    nodes = _STATE_EMITS + (_JOIN_EMITS if defn.spec.source.join_streams else ())
    return any(node in plan for node in nodes)


# Nodes of an analyzed plan, as Spark prints them, whose state can emit rows when the
# watermark or a timeout evicts it.
_STATE_EMITS = (
    "Aggregate",
    "FlatMapGroupsWithState",
    "FlatMapGroupsInPandasWithState",
    "TransformWithState",
)
_JOIN_EMITS = ("Join LeftOuter", "Join RightOuter", "Join FullOuter", "Join LeftAnti")


def starting_offsets(plan: TablePlan, configured: Any) -> Any:
    """The configured start, unless `recover` left offsets for this (new) checkpoint."""
    f = recover_file(plan.checkpoint_path)
    if f.is_file() and checkpoint_is_new(plan.checkpoint_path):
        data = json.loads(f.read_text())
        logger.info(
            "table %s: starting from recovered offsets %s", plan.name, data["starting_offsets"]
        )
        return data["starting_offsets"]
    return configured


def read_snapshot(spark: SparkSession, path: str, *, engine: str) -> DataFrame:
    """The latest version of a Delta table as a static DataFrame (stream–static joins)."""
    from streams.delta import delta_engine

    return delta_engine(engine).read_snapshot(spark, path)


def _with_connect_schema(
    project: LoadedProject, defn: TableDefinition, bootstrap: str
) -> TableDefinition:
    """`defn` with the payload columns read from the newest record's Connect schema, once
    per query start (a change of the source table's columns needs a restart)."""
    from streams.kafka import KafkaStreamError, sample_connect_struct

    k = defn.spec.source.kafka
    assert k is not None and k.format in ("debezium-json", "upsert-json")
    try:
        struct = sample_connect_struct(
            bootstrap,
            k.topic_list,
            client_config=project.config.kafka.client_config(k.options),
            format="upsert-json" if k.format == "upsert-json" else "debezium-json",
        )
    except KafkaStreamError as e:
        raise CompileError(
            f"Table `{defn.name}` ({defn.path}) takes its columns from the Connect schema of "
            f"its records (`connect_schema: true`), but {e}. Produce a record with "
            "its schema first (JsonConverter with `schemas.enable=true`), or declare the "
            "columns with `schema: NAME`.",
            table=defn.name,
        ) from e
    ddl = ", ".join(
        f"`{f.name}` {f.dataType.simpleString()}" + ("" if f.nullable else " NOT NULL")
        for f in struct.fields
    )
    logger.info("table %s: columns from the records' Connect schema: %s", defn.name, ddl)
    return defn.model_copy(update={"payload_ddl": ddl})


def build_query(
    project: LoadedProject,
    table: str,
    spark: SparkSession,
    *,
    once: bool,
    batch: BatchFactory[B],
    bootstrap: str | None = None,
    engines: dict[str, str] | None = None,
) -> CompiledQuery[B]:
    """Wire source → transform → stateful operators → foreachBatch sink for `table`.

    `batch(plan, views, defn)` makes the foreachBatch function (the runtime's writer;
    views maps the tables the SQL names to their registered views; `defn` is the table
    as the query reads it). `bootstrap` is the
    resolved Kafka bootstrap (needed for Kafka-sourced tables; `embedded` must already
    be resolved by the caller) and `engines` the resolved `{kafka, delta}` engines
    (default: python for both).
    """
    defn = project.tables[table]
    spec = defn.spec
    engines = engines or {"kafka": "python", "delta": "python"}
    join_names = [j.table for j in spec.source.join_streams]
    static = [
        t
        for t in defn.static_tables
        if t in project.tables and t not in spec.source.upstream_tables
    ]
    plan = plan_table(project, table, static_tables=static)
    registered: list[str] = []
    views: dict[str, str] = {}
    kept: dict[str, KeptSnapshot] = {}
    for name in static:
        path = str(project.table_path(name))
        if not table_exists(path):
            raise CompileError(
                f"Table `{table}`: its SQL reads `{name}` as a snapshot, but `{name}` has no "
                f"Delta table yet at {path}. Run `{name}` first (`warehouse run --table {name} --once`).",
                table=table,
            )
        view = f"snap_{name}_{uuid.uuid4().hex[:8]}"
        if spec.snapshots is not None:
            kept[name] = kept_snapshot(spark, path, engine=engines["delta"])
            kept[name].frame.createOrReplaceTempView(view)
        else:
            read_snapshot(spark, path, engine=engines["delta"]).createOrReplaceTempView(view)
        views[name] = view
        registered.append(view)

    if spec.source.kafka is not None:
        if not bootstrap:
            raise CompileError(
                f"Table `{table}` reads Kafka but no bootstrap was resolved; "
                "set `kafka.bootstrap` in conf/<env>.yml.",
                table=table,
            )
        from streams.kafka import read_kafka_stream

        k = spec.source.kafka
        if k.connect_schema:
            defn = _with_connect_schema(project, defn, bootstrap)
        stream = read_kafka_stream(
            spark,
            bootstrap=bootstrap,
            topics=k.topic_list or None,
            pattern=k.pattern,
            starting_offsets=starting_offsets(plan, k.starting_offsets),
            max_offsets_per_trigger=k.max_offsets_per_trigger,
            on_data_loss=k.on_data_loss,
            client_config=project.config.kafka.client_config(k.options),
            engine=engines["kafka"],
            # Only `raw` keeps headers in the table; the parsed formats drop them.
            include_headers=k.format == "raw",
            checkpoint_location=plan.checkpoint_path,
        )
        out = stream  # parse + stateless transform run per batch (bad rows to quarantine)
    else:
        from streams.delta import read_delta_stream

        src = spec.source
        assert src.table is not None
        upstream = read_delta_stream(
            spark,
            str(project.table_path(src.table)),
            read=src.read,
            max_versions_per_trigger=src.max_versions_per_trigger,
            engine=engines["delta"],
        )
        wm_first = bool(spec.watermark and spec.watermark.column in upstream.columns)
        if wm_first:
            upstream = with_watermark(upstream, defn)
        for j in src.join_streams:
            js = read_delta_stream(spark, str(project.table_path(j.table)), engine=engines["delta"])
            if j.watermark:
                js = js.withWatermark(j.watermark.column, j.watermark.delay)
            view = f"stream_{j.table}_{uuid.uuid4().hex[:8]}"
            js.createOrReplaceTempView(view)
            views[j.table] = view
            registered.append(view)
        missing_joins = [n for n in join_names if n not in views]
        assert not missing_joins
        out = apply_transform(
            upstream, project=project, defn=defn, views=views, registered=registered
        )
        out = stateful(out, defn, watermark_done=wm_first)

    foreach = batch(plan, views, defn)
    no_data = spec.source.kafka is None and emits_without_data(out, defn, plan.output_mode)
    writer = (
        out.writeStream.queryName(f"warehouse_{table}")
        .option("checkpointLocation", plan.checkpoint_path)
        .outputMode(plan.output_mode)
        .foreachBatch(foreach)
    )
    if once:
        writer = writer.trigger(availableNow=True)
    elif spec.trigger and spec.trigger.interval:
        writer = writer.trigger(processingTime=spec.trigger.interval)
    # Each batch's plan takes the cached copies wherever it reads the tables, so caching
    # them last leaves nothing cached if the build fails before.
    snapshots = None
    if spec.snapshots is not None and kept:
        snapshots = SnapshotCache(table, kept, interval_seconds(spec.snapshots.max_age))
    return CompiledQuery(
        plan=plan,
        writer=writer,
        batch=foreach,
        views=registered,
        no_data_batches=no_data,
        snapshots=snapshots,
    )
