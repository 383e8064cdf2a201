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
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

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
    """Source rows per batch id: the records a Kafka batch held (the writer), else the
    query progress's numInputRows (the runner fills it)."""
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


class _Outcome(NamedTuple):
    rows_in: int
    written: int
    quarantined: int
    dropped: int
    version: int | None


def _observed(observation: Any, *, wait: float = 10.0) -> dict[str, Any] | None:
    """An `Observation`'s metrics once an action has reported them, waiting up to `wait`
    seconds; else None. (`Observation.get` would block forever when no action ran the
    observed plan.)"""
    if observation is None:
        return None
    jo = getattr(observation, "_jo", None)
    if jo is None:
        return None
    deadline = time.monotonic() + wait
    while not jo.future().isCompleted():
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)
    return observation.get


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
        self._arrow: tuple[Any] | None = None
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
        from warehouse.compile.query import recover_file

        started = time.monotonic()
        spark = batch_df.sparkSession
        cached: list[DataFrame] = []
        registered: list[str] = []

        def cache(frame: DataFrame) -> DataFrame:
            """Persist `frame` for the rest of the batch (unpersisted when it ends)."""
            frame = frame.persist()
            cached.append(frame)
            return frame

        try:
            one_pass = self._one_pass(batch_id)
            out = None
            if one_pass and self._arrow_payload() is not None:
                out = self._write_arrow(batch_df, batch_id, cache)
            if out is not None:
                path = "Arrow"
            elif one_pass:
                path = "one pass"
                out = self._write_one_pass(batch_df, batch_id, cache)
            else:
                path = ""
                out = self._write_cached(batch_df, batch_id, cache, registered)
            if self.defn.spec.publish is not None:
                self._publish(batch_id)
            f = recover_file(self.plan.checkpoint_path)
            if f.exists():
                f.unlink()  # the new checkpoint now owns the position
        finally:
            for frame in reversed(cached):
                frame.unpersist()
            for view in registered:
                spark.catalog.dropTempView(view)
        s = self.stats
        s.batches += 1
        s.rows_in += out.rows_in
        if self.defn.spec.source.kafka is not None:
            # Exact records of the batch. Spark's numInputRows counts a source read twice
            # when a batch reads its records again (the quarantine pass of `_one_pass`).
            s.input_rows[batch_id] = out.rows_in
        s.rows_written += out.written
        s.quarantined += out.quarantined
        s.dropped += out.dropped
        s.last_batch = batch_id
        if out.version is None:
            s.skipped += 1
        else:
            s.last_version = out.version
        elapsed = time.monotonic() - started
        s.batch_seconds += elapsed
        logger.info(
            "table %s: batch %d%s: %d rows in, %d written, %d quarantined, %d dropped, "
            "version %s, %.1fs",
            self.defn.name,
            batch_id,
            f" ({path})" if path else "",
            out.rows_in,
            out.written,
            out.quarantined,
            out.dropped,
            "skipped (already committed)" if out.version is None else out.version,
            elapsed,
        )

    def _one_pass(self, batch_id: int) -> bool:
        """Whether this batch is written as it is read, without persisting it.

        For a Kafka-sourced table without a transform (a landing table, the high-volume
        case) whose expectations cannot fail the batch, appended or upserted by the
        embedded engine: the good rows are parsed, judged and written in one pass, and
        the counts are observed during that write. The records are read again only
        when that pass saw a malformed or quarantined one (a Kafka range reads the same
        records twice). Persisting a batch costs Spark more than parsing it.

        A replayed batch (already in the table) takes the persisted path: its write is
        skipped, so nothing would observe it.
        """
        spec = self.defn.spec
        if (
            spec.source.kafka is None
            or spec.transform is not None
            or self.defn.sql is not None
            or spec.sink.mode not in ("append", "upsert")
            or self.engines["delta"] == "native"
        ):
            return False
        from warehouse.quality import is_row_level

        if any(is_row_level(e) and e.on_violation == "fail" for e in spec.expectations):
            return False  # judged whole before the write (RowChecks.fail_fast)
        from streams.delta import committed

        return not committed(self._target(quarantine=False), batch_id)

    def _arrow_payload(self) -> Any:
        """The payload as a StructType when this table's batches may take the Arrow path
        (`streams.delta.kafka_json`), else None: on top of `_one_pass`, JSON appended
        through the Python Kafka source, no expectations, flat payload types Arrow
        parses as Spark does, and `engines.parse` not `spark`. Decided once."""
        if self._arrow is None:
            self._arrow = (self._arrow_struct(),)
        return self._arrow[0]

    def _arrow_struct(self) -> Any:
        spec = self.defn.spec
        kafka = spec.source.kafka
        if (
            kafka is None
            or kafka.format != "json"
            or spec.sink.mode != "append"
            or spec.expectations
            or self.engines.get("parse", "arrow") != "arrow"
            or self.engines.get("kafka") == "native"
        ):
            return None
        from streams.delta.kafka_json import arrow_payload
        from streams.kafka.parse import as_struct
        from warehouse.compile.query import payload_schema

        schema = payload_schema(self.project, self.defn)
        if schema is None:
            return None
        struct = as_struct(schema, "json")
        return struct if arrow_payload(struct) is not None else None

    def _write_arrow(
        self, df: DataFrame, batch_id: int, cache: Callable[[DataFrame], DataFrame]
    ) -> _Outcome | None:
        """The batch through `streams.delta.kafka_json`: Kafka read, parsed and written
        in Arrow in Spark's tasks, records Arrow hands back parsed by Spark (their bad
        ones quarantined). None when that path cannot take this batch (its ranges are
        not readable from the plan, or its tasks failed): nothing was committed."""
        from streams.delta.kafka_json import kafka_json_append
        from streams.kafka.planned import planned_partitions

        partitions = planned_partitions(df)
        if partitions is None:
            return None
        info = self._commit_info(batch_id)
        with kafka_json_append(
            df.sparkSession,
            partitions,
            self._target(quarantine=False),
            batch_id,
            payload=self._arrow_payload(),
            commit_info=info,
        ) as done:
            if done is None:
                return None
            quarantined = 0
            if done.bad is not None:
                parts = [self._parse_quarantine(done.bad, batch_id)]
                quarantined = self._write_quarantine(parts, batch_id, info, cache)
            logger.debug(
                "table %s: batch %d: %d of %d records typed by Arrow",
                self.defn.name,
                batch_id,
                done.typed,
                done.records,
            )
            return _Outcome(done.records, done.written, quarantined, 0, done.version)

    def _write_one_pass(
        self, df: DataFrame, batch_id: int, cache: Callable[[DataFrame], DataFrame]
    ) -> _Outcome:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        from streams.kafka import parse_kafka
        from warehouse.compile.query import payload_schema

        kafka = self.defn.spec.source.kafka
        assert kafka is not None
        schema = payload_schema(self.project, self.defn)
        tag = f"{self.defn.name}_{batch_id}_{uuid.uuid4().hex[:8]}"
        parse_seen = Observation(f"wh_parse_{tag}")
        parsed = parse_kafka(df, format=kafka.format, schema=schema, observe=parse_seen)
        checks = self._compiled_checks(parsed.good)
        good, checks_seen = parsed.good, None
        if checks is not None:
            checks_seen = Observation(f"wh_checks_{tag}")
            good = checks.observe(good, checks_seen)
        written_seen = Observation(f"wh_written_{tag}")
        good = good.observe(written_seen, F.count(F.lit(1)).alias("rows"))
        info = self._commit_info(batch_id)
        version = self._write(good, batch_id, info, quarantine=False)

        wait = 10.0 if version is not None else 0.0  # a skipped write ran nothing
        p, c, w = (_observed(o, wait=wait) for o in (parse_seen, checks_seen, written_seen))
        known = p is not None and w is not None and (checks is None or c is not None)
        if not known:
            # Nothing lost if the write did not report its counts: read everything again.
            logger.warning(
                "table %s: batch %d: the write reported no counts; re-reading the batch "
                "for its quarantine",
                self.defn.name,
                batch_id,
            )
        want_parse = not known or bool(p and p["flagged"])
        want_checks = checks is not None and (not known or bool(c and c["quarantined"]))
        quarantined = 0
        if want_parse or want_checks:
            quarantined = self._quarantine_again(
                df,
                batch_id,
                info,
                cache,
                schema,
                checks,
                want_parse=want_parse,
                want_checks=want_checks,
            )
        if checks is not None and c is not None:
            metrics = checks.observed_metrics(c, table=self.defn.name, batch_id=batch_id)
            self._quality_events(df.sparkSession, batch_id, metrics)
        written = int(w["rows"]) if w else 0
        return _Outcome(
            rows_in=int(p["records"]) if p else written + quarantined,
            written=written,
            quarantined=quarantined,
            dropped=int(c["removed"]) - int(c["quarantined"]) if c else 0,
            version=version,
        )

    def _quarantine_again(
        self,
        df: DataFrame,
        batch_id: int,
        info: dict[str, Any],
        cache: Callable[[DataFrame], DataFrame],
        schema: Any,
        checks: Any,
        *,
        want_parse: bool,
        want_checks: bool,
    ) -> int:
        """Second pass of `_write_one_pass`: the batch's quarantine rows, read again and
        parsed with the same payload `schema`."""
        from streams.kafka import parse_kafka

        kafka = self.defn.spec.source.kafka
        assert kafka is not None
        # Both kinds come from one parse: persist it, or the union would read twice.
        both = want_parse and want_checks
        parsed = parse_kafka(
            df, format=kafka.format, schema=schema, persist=cache if both else None
        )
        parts = []
        if want_parse:
            parts.append(self._parse_quarantine(parsed.bad, batch_id))
        if want_checks:
            parts.append(checks.quarantined(parsed.good, batch_id=batch_id))
        return self._write_quarantine(parts, batch_id, info, cache)

    def _write_quarantine(
        self,
        parts: list[DataFrame],
        batch_id: int,
        info: dict[str, Any],
        cache: Callable[[DataFrame], DataFrame],
    ) -> int:
        """Union the quarantine frames, write them if there is any row; the row count."""
        q = parts[0]
        for other in parts[1:]:
            q = q.unionByName(other)
        q = cache(q)
        n = q.count()
        if n:
            self._write(q, batch_id, info, quarantine=True)
        return n

    def _write_cached(
        self,
        batch_df: DataFrame,
        batch_id: int,
        cache: Callable[[DataFrame], DataFrame],
        registered: list[str],
    ) -> _Outcome:
        """The general path: the batch is persisted once parsed, transformed, judged
        whole (expectations that fail the batch do so before anything is written), then
        written, then its quarantine."""
        from warehouse.compile.query import apply_transform, payload_schema

        spark = batch_df.sparkSession
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
            version = self._write(good, batch_id, info, quarantine=False)
            quarantined = checks_quarantined = 0
            if quarantine:
                quarantined = self._write_quarantine(quarantine, batch_id, info, cache)
            if checked is not None:
                if checked.quarantine is not None:
                    checks_quarantined = checked.quarantine.count()
                dropped = max(0, before - written - checks_quarantined)
                self._quality_events(spark, batch_id, checked.metrics)
        finally:
            if checked is not None:
                checked.unpersist()
        return _Outcome(rows_in, written, quarantined, dropped, version)

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

    def _target(self, *, quarantine: bool) -> Any:
        from streams.delta import DeltaTarget

        sink = self.defn.spec.sink
        # A Kafka offset is unique within its partition: a Parquet dictionary of them
        # only costs the writer time (benchmarks.md, "Parquet settings").
        unique = ("_offset",) if self.defn.spec.source.kafka is not None else ()
        if quarantine:
            return DeltaTarget(
                self.plan.quarantine_path,
                mode="append",
                app_id=f"{self._app_id()}:quarantine",
                engine=self.engines["delta"],  # type: ignore[arg-type]
                table=self.defn.name + "__quarantine",
                unique_columns=unique,
            )
        return DeltaTarget(
            self.plan.table_path,
            mode=sink.mode,
            keys=list(getattr(sink, "keys", []) or []),
            sequence_by=getattr(sink, "sequence_by", None),
            partition_by=list(sink.partition_by),
            app_id=self._app_id(),
            engine=self.engines["delta"],  # type: ignore[arg-type]
            table=self.defn.name,
            unique_columns=unique,
        )

    def _write(
        self, df: DataFrame, batch_id: int, info: dict[str, Any], *, quarantine: bool
    ) -> int | None:
        """Write `df` as this batch's commit to the table (or its quarantine table)."""
        from streams.delta import write_batch

        target = self._target(quarantine=quarantine)
        return write_batch(df, batch_id, target, commit_info=info)

    def _parse_quarantine(self, bad: DataFrame, batch_id: int) -> DataFrame:
        from warehouse.quality import quarantine_from_parse_errors

        return quarantine_from_parse_errors(bad, batch_id=batch_id)

    def _compiled_checks(self, df: DataFrame) -> Any:
        """The table's row-level expectations compiled against `df`'s columns (once), or
        None without any."""
        if not self.defn.spec.expectations:
            return None
        if self._checks is None:
            from warehouse.quality import compile_row_checks

            self._checks = compile_row_checks(
                self.defn.spec.expectations, df.schema, table=self.defn.name
            )
        return None if self._checks.empty else self._checks

    def _row_checks(self, df: DataFrame, batch_id: int) -> Any:
        """Row-level expectations (warehouse.quality): a `CheckedBatch`, or None without any."""
        checks = self._compiled_checks(df)
        if checks is None:
            return None
        return checks.apply(df, table=self.defn.name, batch_id=batch_id)

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
