"""Build one table's Structured Streaming query (docs/architecture.md "How a table runs").

No Spark import at module import time: pyspark is imported inside functions.
`build_query` returns a `CompiledQuery` whose `start()` starts the query; the
per-batch work (parse, transform, checks, idempotent Delta writes) happens in
`warehouse.compile.batch.BatchWriter`, the `foreachBatch` function.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.compile.errors import CompileError, TransformError
from warehouse.compile.plan import TablePlan, plan_table
from warehouse.compile.sql import SOURCE_VIEW, rewrite_views, sql_text

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

    from warehouse.compile.batch import BatchStats, BatchWriter
    from warehouse.project import Project
    from warehouse.spec.table import TableDefinition

logger = logging.getLogger(__name__)

RECOVER_SUFFIX = ".recover.json"


@dataclass
class TransformContext:
    """What a Python transform gets besides its DataFrame."""

    spark: SparkSession
    table: str
    layer: str
    project: Project
    batch_id: int | None = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class CompiledQuery:
    """A table's query, ready to start. `stats` is filled by the foreachBatch function."""

    plan: TablePlan
    writer: DataStreamWriter
    batch: BatchWriter
    views: list[str]

    @property
    def stats(self) -> BatchStats:
        return self.batch.stats

    def start(self) -> StreamingQuery:
        logger.info(
            "table %s: starting query (checkpoint %s)", self.plan.name, self.plan.checkpoint_path
        )
        return self.writer.start()

    def stop_at_batch_boundary(self, query: StreamingQuery, *, timeout: float = 120) -> None:
        """Let the running batch finish and commit, then stop the query.

        `StreamingQuery.stop()` alone cancels the running batch's jobs and can
        interrupt it between our Delta commit and Spark's commit log (the replay
        would be skipped by the app transaction, but a clean stop is cheaper):
        so take the batch lock (no batch is writing), wait until Spark's commit
        log has the last batch we wrote, then stop. A batch that starts after
        that fails without writing (`StopRequested`) and is replayed next run.
        """
        import time

        with self.batch.lock:
            self.batch.stopping = True
            last = self.batch.stats.last_batch
            if last is not None:
                marker = Path(self.plan.checkpoint_path) / "commits" / str(last)
                deadline = time.monotonic() + timeout
                while not marker.exists() and query.isActive and time.monotonic() < deadline:
                    time.sleep(0.1)
        query.stop()
        logger.info("table %s: query stopped after batch %s", self.plan.name, last)


def recover_file(checkpoint: str | Path) -> Path:
    """Where `warehouse recover` leaves the starting offsets for a new checkpoint."""
    return Path(str(checkpoint).rstrip("/") + RECOVER_SUFFIX)


def checkpoint_is_new(checkpoint: str | Path) -> bool:
    offsets = Path(checkpoint) / "offsets"
    return not offsets.is_dir() or not any(offsets.iterdir())


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


def kafka_client_config(project: Project, extra: dict[str, str] | None = None) -> dict[str, str]:
    k = project.config.kafka
    return {**k.security.client_config(), **k.client, **(extra or {})}


def payload_schema(project: Project, defn: TableDefinition) -> Any:
    """The parse schema for `parse_kafka`: the loader's DDL of `schemas/NAME`, or None."""
    if defn.payload_ddl is not None:
        return defn.payload_ddl
    kafka = defn.spec.source.kafka
    if kafka is None or kafka.schema_ is None:
        return None
    schema = project.payload_schemas[kafka.schema_]
    to_ddl = getattr(schema, "to_ddl", None)
    return to_ddl() if callable(to_ddl) else schema


def load_callable(project: Project, ref: str, *, table: str, layer: str) -> Callable[..., Any]:
    """The table's Python transform `package.module:function`, imported from the project."""
    fn = project.transform_callable(table)
    if not callable(fn):
        raise TransformError(
            f"Table `{table}` (layer `{layer}`): `{ref}` is not callable; it must be a function "
            "`(DataFrame, context) -> DataFrame`.",
            table=table,
            layer=layer,
        )
    return fn


def apply_transform(
    df: DataFrame,
    *,
    project: Project,
    defn: TableDefinition,
    views: dict[str, str],
    batch_id: int | None = None,
    registered: list[str] | None = None,
) -> DataFrame:
    """Run the table's SQL or Python transform over `df` inside an error boundary.

    `views` maps other table names in the SQL to already registered view names;
    `df` itself is registered as a fresh view standing for `source`.
    """
    from pyspark.sql import DataFrame

    spec = defn.spec
    table, layer = defn.name, defn.layer
    spark = df.sparkSession
    if spec.transform is not None and spec.transform.python:
        fn = load_callable(project, spec.transform.python, table=table, layer=layer)
        ctx = TransformContext(
            spark=spark, table=table, layer=layer, project=project, batch_id=batch_id
        )
        try:
            out = fn(df, ctx)
        except Exception as e:
            raise TransformError(
                f"Table `{table}` (layer `{layer}`): the Python transform "
                f"`{spec.transform.python}` raised {type(e).__name__}: {e}",
                table=table,
                layer=layer,
            ) from e
        if not isinstance(out, DataFrame):
            raise TransformError(
                f"Table `{table}` (layer `{layer}`): the Python transform "
                f"`{spec.transform.python}` returned `{type(out).__name__}`, expected a DataFrame.",
                table=table,
                layer=layer,
            )
        return out
    text = sql_text(project, defn)
    if text is None:
        return df
    source_view = f"{SOURCE_VIEW}_{table}_{uuid.uuid4().hex[:8]}"
    df.createOrReplaceTempView(source_view)
    if registered is not None:
        registered.append(source_view)
    sql = rewrite_views(text, {**views, SOURCE_VIEW: source_view}, table=table)
    try:
        return spark.sql(sql)
    except Exception as e:
        raise TransformError(
            f"Table `{table}` (layer `{layer}`, {defn.path}): the SQL transform failed: "
            f"{_first_line(e)}. Fix `transform.sql`.",
            table=table,
            layer=layer,
        ) from e


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def read_snapshot(spark: SparkSession, path: str, *, engine: str) -> DataFrame:
    """The latest version of a Delta table as a static DataFrame (stream–static joins)."""
    if engine == "native":
        return spark.read.format("delta").load(path)
    from streams.delta.arrow import read_table

    arrow = read_table(path)
    return spark.createDataFrame(arrow)


def table_exists(path: str | Path) -> bool:
    return (Path(path) / "_delta_log").is_dir() and any((Path(path) / "_delta_log").glob("*.json"))


def _window_aggregate(df: DataFrame, defn: TableDefinition) -> DataFrame:
    from pyspark.sql import functions as F

    agg = defn.spec.aggregate
    assert agg is not None
    measures = [F.expr(expr).alias(name) for name, expr in agg.measures.items()]
    groups = [F.col(c) for c in agg.group_by]
    if agg.window is None:
        return df.groupBy(*groups).agg(*measures)
    w = agg.window
    win = (
        F.window(F.col(w.column), w.size, w.slide) if w.slide else F.window(F.col(w.column), w.size)
    )
    out = df.groupBy(win.alias("_window"), *groups).agg(*measures)
    return out.select(
        F.col("_window.start").alias("window_start"),
        F.col("_window.end").alias("window_end"),
        *[F.col(c) for c in agg.group_by],
        *[F.col(n) for n in agg.measures],
    )


def _stateful(df: DataFrame, defn: TableDefinition, *, watermark_done: bool) -> DataFrame:
    """Watermark (when not applied before the transform), dedupe, aggregate."""
    spec = defn.spec
    if spec.watermark and not watermark_done:
        df = _with_watermark(df, defn)
    if spec.dedupe:
        missing = [k for k in spec.dedupe.keys if k not in df.columns]
        if missing:
            raise CompileError(
                f"Table `{defn.name}` ({defn.path}): dedupe key(s) "
                + ", ".join(f"`{k}`" for k in missing)
                + " are not columns of the transformed stream ("
                + ", ".join(f"`{c}`" for c in df.columns)
                + "). Add them to the SELECT or change `dedupe.keys`.",
                table=defn.name,
            )
        if spec.watermark:
            df = df.dropDuplicatesWithinWatermark(list(spec.dedupe.keys))
        else:
            df = df.dropDuplicates(list(spec.dedupe.keys))
    if spec.aggregate:
        df = _window_aggregate(df, defn)
    return df


def _with_watermark(df: DataFrame, defn: TableDefinition) -> DataFrame:
    wm = defn.spec.watermark
    assert wm is not None
    if wm.column not in df.columns:
        raise CompileError(
            f"Table `{defn.name}` ({defn.path}): watermark column `{wm.column}` is neither a "
            "source column nor an output column of the transform ("
            + ", ".join(f"`{c}`" for c in df.columns)
            + "). Fix `watermark.column`.",
            table=defn.name,
        )
    return df.withWatermark(wm.column, wm.delay)


def build_query(
    project: Project,
    table: str,
    spark: SparkSession,
    *,
    once: bool,
    bootstrap: str | None = None,
    engines: dict[str, str] | None = None,
) -> CompiledQuery:
    """Wire source → transform → stateful operators → foreachBatch sink for `table`.

    `bootstrap` is the resolved Kafka bootstrap (needed for Kafka-sourced
    tables; `embedded` must already be resolved by the caller) and `engines`
    the resolved `{kafka, delta}` engines (default: python for both).
    """
    from warehouse.compile.batch import BatchWriter

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
    for name in static:
        path = str(project.table_path(name))
        if not table_exists(path):
            raise CompileError(
                f"Table `{table}`: its SQL reads `{name}` as a snapshot, but `{name}` has no "
                f"Delta table yet at {path}. Run `{name}` first (`warehouse run --table {name} --once`).",
                table=table,
            )
        view = f"snap_{name}_{uuid.uuid4().hex[:8]}"
        read_snapshot(spark, path, engine=engines["delta"]).createOrReplaceTempView(view)
        views[name] = view
        registered.append(view)

    if spec.source.kafka is not None:
        ops = [o for o in ("watermark", "dedupe", "aggregate") if getattr(spec, o) is not None]
        if ops:
            raise CompileError(
                f"Table `{table}` ({defn.path}): a Kafka-sourced table takes no stateful operators "
                f"(found {', '.join(f'`{o}`' for o in ops)}); land the raw events here and "
                "dedupe/aggregate in a table that reads this one.",
                table=table,
            )
        if not bootstrap:
            raise CompileError(
                f"Table `{table}` reads Kafka but no bootstrap was resolved; "
                "set `kafka.bootstrap` in conf/<env>.yml.",
                table=table,
            )
        from streams.kafka import read_kafka_stream

        k = spec.source.kafka
        stream = read_kafka_stream(
            spark,
            bootstrap=bootstrap,
            topics=k.topic_list or None,
            pattern=k.pattern,
            starting_offsets=starting_offsets(plan, k.starting_offsets),
            max_offsets_per_trigger=k.max_offsets_per_trigger,
            on_data_loss=k.on_data_loss,
            client_config=kafka_client_config(project, dict(k.options)),
            engine=engines["kafka"],
            # Only `raw` keeps headers in the table; the parsed formats drop them.
            include_headers=k.format == "raw",
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
            upstream = _with_watermark(upstream, defn)
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
        out = _stateful(out, defn, watermark_done=wm_first)

    stats_writer = BatchWriter(
        project=project, defn=defn, plan=plan, engines=engines, views=views, bootstrap=bootstrap
    )
    writer = (
        out.writeStream.queryName(f"warehouse_{table}")
        .option("checkpointLocation", plan.checkpoint_path)
        .outputMode(plan.output_mode)
        .foreachBatch(stats_writer)
    )
    if once:
        writer = writer.trigger(availableNow=True)
    elif spec.trigger and spec.trigger.interval:
        writer = writer.trigger(processingTime=spec.trigger.interval)
    return CompiledQuery(plan=plan, writer=writer, batch=stats_writer, views=registered)
