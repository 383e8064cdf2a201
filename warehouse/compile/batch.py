"""The `foreachBatch` function of every table: parse, transform, check, write once.

Runs on the driver for each micro-batch. Exactly-once comes from the sink:
`write_batch` commits with the app transaction `(app_id, batch_id)` and skips a
batch it already committed, so a replayed batch (after a crash between the
Delta commit and Spark's commit log) changes nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from warehouse.compile.plan import TablePlan
    from warehouse.project import Project
    from warehouse.spec.table import TableDefinition

logger = logging.getLogger(__name__)


@dataclass
class BatchStats:
    """Counters of one query, updated after each micro-batch (driver side, one thread)."""

    rows_in: int = 0
    """Rows handed to foreachBatch (after the streaming operators)."""
    input_rows: dict[int, int] = field(default_factory=dict)
    """Source rows per batch id, from the query progress (the runner fills it)."""
    rows_written: int = 0
    quarantined: int = 0
    dropped: int = 0
    batches: int = 0
    skipped: int = 0
    last_batch: int | None = None
    last_version: int | None = None
    batch_seconds: float = 0.0
    error: BaseException | None = None
    published: int = 0
    notes: list[str] = field(default_factory=list)


class StopRequested(Exception):
    """Raised by a batch that began after the runner asked the query to stop.

    Failing the batch (instead of returning) keeps it out of Spark's commit log,
    so the next run replays it; returning would mark it done without a write.
    """


class BatchWriter:
    """Callable given to `foreachBatch`.

    Concurrency: Spark calls it one batch at a time from the query thread; the
    runner takes `lock` to wait for a running batch to finish before it stops
    the query, and sets `stopping` so that a batch starting after that fails
    without writing.
    """

    def __init__(
        self,
        *,
        project: Project,
        defn: TableDefinition,
        plan: TablePlan,
        engines: dict[str, str],
        views: dict[str, str],
        bootstrap: str | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.project = project
        self.defn = defn
        self.plan = plan
        self.engines = engines
        self.views = views
        self.stats = BatchStats()
        self._query_id: str | None = None
        self._checks: Any = None
        self.lock = threading.Lock()
        self.stopping = False
        self.on_batch: Callable[[int], None] | None = None

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        with self.lock:
            if self.stopping:
                raise StopRequested(
                    f"table {self.defn.name}: stop requested before batch {batch_id}"
                )
            try:
                self._run(batch_df, batch_id)
            except BaseException as e:
                # Kept for the runner: Spark wraps it in a StreamingQueryException.
                self.stats.error = e
                raise
        if self.on_batch is not None:
            self.on_batch(batch_id)

    # -- the batch -----------------------------------------------------------

    def _run(self, batch_df: DataFrame, batch_id: int) -> None:
        from warehouse.compile.query import apply_transform, payload_schema, recover_file

        started = time.monotonic()
        table = self.defn.name
        spark = batch_df.sparkSession
        registered: list[str] = []
        cached: list[DataFrame] = []

        def cache(frame: DataFrame) -> DataFrame:
            frame = frame.persist()
            cached.append(frame)
            return frame

        kafka = self.defn.spec.source.kafka
        # The source is read once: a Kafka batch is cached parsed (both the good rows and
        # the quarantine derive from it, one read and one parse), any other as it comes.
        df = batch_df if kafka is not None else cache(batch_df)
        checked = None
        try:
            quarantine: list[DataFrame] = []
            good = df
            if kafka is None:
                rows_in = df.count()
            else:
                from streams.kafka import parse_kafka

                staged: list[DataFrame] = []

                def stage(frame: DataFrame) -> DataFrame:
                    staged.append(cache(frame))
                    return staged[-1]

                parsed = parse_kafka(
                    df,
                    format=kafka.format,
                    schema=payload_schema(self.project, self.defn),
                    persist=stage,
                )
                rows_in = staged[0].count()
                quarantine.append(self._parse_quarantine(parsed.bad, batch_id))
                good = cache(
                    apply_transform(
                        parsed.good,
                        project=self.project,
                        defn=self.defn,
                        views=self.views,
                        batch_id=batch_id,
                        registered=registered,
                    )
                )
            checked = self._row_checks(good, batch_id)
            dropped = 0
            if checked is None:
                written = good.count()
            else:
                before = good.count()
                good = cache(checked.keep)
                written = good.count()
                if checked.quarantine is not None:
                    quarantine.append(checked.quarantine)
            info = self._commit_info(batch_id)
            version = self._write(good, batch_id, self.plan.table_path, info, quarantine=False)
            quarantined = checks_quarantined = 0
            if quarantine:
                q = quarantine[0]
                for other in quarantine[1:]:
                    q = q.unionByName(other)
                q = cache(q)
                quarantined = q.count()
                if quarantined:
                    self._write(q, batch_id, self.plan.quarantine_path, info, quarantine=True)
            if checked is not None:
                if checked.quarantine is not None:
                    checks_quarantined = checked.quarantine.count()
                dropped = max(0, before - written - checks_quarantined)
                self._quality_events(spark, batch_id, checked.metrics)
            if self.defn.spec.publish is not None:
                self._publish(batch_id)
            f = recover_file(self.plan.checkpoint_path)
            if f.exists():
                f.unlink()  # the new checkpoint now owns the position
        finally:
            if checked is not None:
                checked.unpersist()
            for frame in reversed(cached):
                frame.unpersist()
            for view in registered:
                spark.catalog.dropTempView(view)
        s = self.stats
        s.batches += 1
        s.rows_in += rows_in
        s.rows_written += written
        s.quarantined += quarantined
        s.dropped += dropped
        s.last_batch = batch_id
        if version is None:
            s.skipped += 1
        else:
            s.last_version = version
        elapsed = time.monotonic() - started
        s.batch_seconds += elapsed
        logger.info(
            "table %s: batch %d: %d rows in, %d written, %d quarantined, %d dropped, "
            "version %s, %.1fs",
            table,
            batch_id,
            rows_in,
            written,
            quarantined,
            dropped,
            "skipped (already committed)" if version is None else version,
            elapsed,
        )

    # -- pieces ----------------------------------------------------------------

    def _app_id(self) -> str:
        return f"{self.defn.name}:{self._query_id_for()}"

    def _query_id_for(self) -> str:
        if self._query_id is None:
            from streams.delta import checkpoint_query_id

            qid = checkpoint_query_id(self.plan.checkpoint_path)
            if not qid:
                raise RuntimeError(
                    f"Table `{self.defn.name}`: no query id in {self.plan.checkpoint_path}/metadata"
                )
            self._query_id = qid
        return self._query_id

    def _commit_info(self, batch_id: int) -> dict[str, Any]:
        from streams.delta import batch_end_offsets

        return {
            "warehouse.sourceOffsets": batch_end_offsets(self.plan.checkpoint_path, batch_id),
            "warehouse.batchId": batch_id,
            "warehouse.table": self.defn.name,
        }

    def _write(
        self, df: DataFrame, batch_id: int, path: str, info: dict[str, Any], *, quarantine: bool
    ) -> int | None:
        from streams.delta import DeltaTarget, write_batch

        sink = self.defn.spec.sink
        name = self.defn.name + ("__quarantine" if quarantine else "")
        if quarantine:
            target = DeltaTarget(
                path,
                mode="append",
                app_id=f"{self._app_id()}:quarantine",
                engine=self.engines["delta"],  # type: ignore[arg-type]
                table=name,
            )
        else:
            target = DeltaTarget(
                path,
                mode=sink.mode,
                keys=list(getattr(sink, "keys", []) or []),
                sequence_by=getattr(sink, "sequence_by", None),
                partition_by=list(sink.partition_by),
                app_id=self._app_id(),
                engine=self.engines["delta"],  # type: ignore[arg-type]
                table=name,
            )
        return write_batch(df, batch_id, target, commit_info=info)

    def _parse_quarantine(self, bad: DataFrame, batch_id: int) -> DataFrame:
        from warehouse.quality import quarantine_from_parse_errors

        return quarantine_from_parse_errors(bad, batch_id=batch_id)

    def _row_checks(self, df: DataFrame, batch_id: int) -> Any:
        """Row-level expectations (warehouse.quality): a `CheckedBatch`, or None without any."""
        if not self.defn.spec.expectations:
            return None
        if self._checks is None:
            from warehouse.quality import compile_row_checks

            self._checks = compile_row_checks(
                self.defn.spec.expectations, df.schema, table=self.defn.name
            )
        if self._checks.empty:
            return None
        return self._checks.apply(df, table=self.defn.name, batch_id=batch_id)

    def _quality_events(self, spark: Any, batch_id: int, metrics: Any) -> None:
        from warehouse.quality import write_quality_events
        from warehouse.runtime.bootstrap import warehouse_root

        write_quality_events(
            spark,
            str(warehouse_root(self.project)),
            metrics,
            app_id=self._app_id(),
            batch_id=batch_id,
        )

    def _publish(self, batch_id: int) -> None:
        """Table → compacted topic: the Delta versions the topic has not received yet.

        `publish_changes` remembers what it published (a committed marker), so a
        replayed batch publishes nothing twice.
        """
        from streams.cdc import publish_changes
        from warehouse.compile.query import kafka_client_config

        spec = self.defn.spec
        assert spec.publish is not None
        if not self.bootstrap:
            raise RuntimeError(
                f"Table `{self.defn.name}` publishes to Kafka but no bootstrap was resolved"
            )
        result = publish_changes(
            self.plan.table_path,
            bootstrap=self.bootstrap,
            topic=spec.publish.kafka.topic,
            keys=list(getattr(spec.sink, "keys", []) or []),
            table=self.defn.name,
            mode="scd2" if spec.sink.mode == "scd2" else "upsert",
            partitions=spec.publish.kafka.partitions,
            client_config=kafka_client_config(self.project),
        )
        self.stats.published += int(getattr(result, "records", 0) or 0)
        logger.info("table %s: batch %d published %s", self.defn.name, batch_id, result)
