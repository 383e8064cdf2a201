"""The ways one table's micro-batch is parsed, judged and written: the Arrow path, one
pass, and the general (cached) path, each with its quarantine.

`BatchWriter` (warehouse.runtime.writer) picks the path per batch; the commits go
through `BatchTargets` (warehouse.runtime.targets). pyspark is imported inside
functions.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from warehouse.spec.expectations import is_row_level
from warehouse.spec.table import Scd2Sink, UpsertSink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from warehouse.runtime.targets import BatchTargets
    from warehouse.spec.model import LoadedProject
    from warehouse.spec.table import TableDefinition

logger = logging.getLogger(__name__)


class Outcome(NamedTuple):
    """What one write path did with a batch (version None: already committed)."""

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
    # pyspark's Java-side Observation: the only way to ask whether an action has
    # reported the metrics without blocking (pyspark has no public non-blocking check).
    jo = getattr(observation, "_jo", None)
    if jo is None:
        return None
    deadline = time.monotonic() + wait
    while not jo.future().isCompleted():
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)
    return observation.get


def _payload_schema(project: LoadedProject, defn: TableDefinition) -> Any:
    """The parse schema for `parse_kafka`: the loader's DDL of `schemas/NAME`, or None."""
    if defn.payload_ddl is not None:
        return defn.payload_ddl
    kafka = defn.spec.source.kafka
    if kafka is None or kafka.schema_ is None:
        return None
    schema = project.payload_schemas[kafka.schema_]
    to_ddl = getattr(schema, "to_ddl", None)
    return to_ddl() if callable(to_ddl) else schema


class WritePaths:
    """How one table's batches are written; one instance per query.

    Concurrency: called from the query thread only (one batch at a time); the
    compiled row checks and the Arrow decision are made once and kept.
    """

    def __init__(
        self,
        *,
        project: LoadedProject,
        defn: TableDefinition,
        engines: dict[str, str],
        views: dict[str, str],
        targets: BatchTargets,
        bootstrap: str | None = None,
    ) -> None:
        self.project = project
        self.bootstrap = bootstrap
        self.defn = defn
        self.engines = engines
        self.views = views
        self.targets = targets
        self._checks: Any = None
        self._arrow: tuple[Any, Any] | None = None
        self.warned: dict[str, int] = {}
        """Rows of the last batch that failed a `warn` expectation (its quality events'
        `failed`), by expectation; the writer clears it before each batch."""

    def one_pass(self, batch_id: int) -> bool:
        """Whether this batch is written as it is read, without persisting it.

        For a Kafka-sourced table without a transform (a landing table, the high-volume
        case) or a table-sourced one (its transform is part of the streaming plan),
        whose expectations cannot fail the batch, appended or kept as SCD2 history
        (either Delta engine: an SCD2 batch is collected once, then planned on the
        driver) or upserted (the Python engine: delta-spark's MERGE runs several jobs
        over its source, so counts observed on it would not be the batch's): the good rows are
        parsed (Kafka), judged and written in one pass, and the counts are observed
        during that write. A Kafka batch is read again only when that pass saw a
        malformed or quarantined record (a Kafka range reads the same records twice); a
        table-sourced one never is, so it takes this path only without an expectation
        that quarantines. Persisting and counting a batch costs Spark more than parsing
        it: on a small continuous batch the count alone is one Spark job of a
        table-sourced batch's two or three.

        A replayed batch (already in the table) takes the persisted path: its write is
        skipped, so nothing would observe it.
        """
        spec = self.defn.spec
        kafka = spec.source.kafka is not None
        if (kafka and (spec.transform is not None or self.defn.sql is not None)) or (
            self.engines["delta"] == "native" and spec.sink.mode == "upsert"
        ):
            return False
        if any(is_row_level(e) and e.on_violation == "fail" for e in spec.expectations):
            return False  # judged whole before the write (RowChecks.fail_fast)
        if not kafka and any(
            is_row_level(e) and e.on_violation == "quarantine" for e in spec.expectations
        ):
            # Its quarantine would come from computing the batch again, which need not
            # give the same rows: a joined snapshot read anew, a clock, a random number.
            return False
        return not self.targets.committed(batch_id)

    def arrow_payload(self, spark: Any = None) -> Any:
        """The payload as a StructType when this table's batches may take the Arrow path
        (`streams.landing`), else None: on top of `one_pass`, JSON appended, row-level
        expectations Arrow judges as Spark does (`warehouse.quality.arrow_rows`), flat
        payload types Arrow parses as Spark does, and `engines.parse` not `spark`; on
        the native engines also a local session (`spark`, the batch's) and a table on the
        local file system (`_local`). Decided once, on the first call."""
        if self._arrow is None:
            self._arrow = self._arrow_struct(spark)
        return self._arrow[0]

    def _arrow_struct(self, spark: Any) -> tuple[Any, Any]:
        """(payload StructType or None, the table's `ArrowChecks` or None)."""
        spec = self.defn.spec
        kafka = spec.source.kafka
        if (
            kafka is None
            or kafka.format != "json"
            or spec.sink.mode != "append"
            or self.engines.get("parse", "arrow") != "arrow"
            or (self.engines.get("kafka") == "native" and self.bootstrap is None)
            or (
                "native" in (self.engines.get("kafka"), self.engines.get("delta"))
                and not self._local(spark)
            )
        ):
            return None, None
        from streams.kafka import as_struct
        from streams.landing import arrow_payload

        schema = _payload_schema(self.project, self.defn)
        if schema is None:
            return None, None
        struct = as_struct(schema, "json")
        parsed = arrow_payload(struct)
        if parsed is None:
            return None, None
        if not any(is_row_level(e) for e in spec.expectations):
            return struct, None
        from warehouse.quality.arrow_rows import arrow_checks

        checks = arrow_checks(spec.expectations, parsed)
        if checks is None:
            logger.info(
                "table %s: an expectation is not judged in Arrow; Spark parses its batches",
                self.defn.name,
            )
            return None, None
        return struct, checks

    def _local(self, spark: Any) -> bool:
        """Whether Spark runs in this process (a `local` master) and the table is on the
        local file system. On the native engines the Arrow path is taken only then: on a
        cluster its tasks would need the project's Python environment on executors that
        the native engines otherwise never ask for, and its delta-rs commit would not
        see the storage settings the cluster gives delta-spark (`spark.hadoop.*`) nor
        write every table feature Delta on the cluster may have enabled."""
        from streams.delta import local_path

        if spark is None or not str(spark.conf.get("spark.master", "")).startswith("local"):
            return False
        return local_path(self.targets.target(quarantine=False).path) is not None

    def kafka_fetch(self) -> Any:
        """How the Arrow path's tasks read the batch's ranges when Spark's own source
        planned them (`streams.kafka.FetchOptions`): the broker and the client settings
        the table's stream reads with (`warehouse.compile.query`), and the isolation
        level its `read_kafka_stream` reads with."""
        from streams.kafka import DEFAULT_BATCH_RECORDS, DEFAULT_ISOLATION_LEVEL, FetchOptions

        kafka = self.defn.spec.source.kafka
        if kafka is None or self.bootstrap is None:
            return None
        return FetchOptions(
            self.bootstrap,
            self.project.config.kafka.client_config(kafka.options),
            DEFAULT_ISOLATION_LEVEL,
            kafka.on_data_loss,
            DEFAULT_BATCH_RECORDS,
        )

    def write_arrow(
        self, df: DataFrame, batch_id: int, cache: Callable[[DataFrame], DataFrame]
    ) -> Outcome | None:
        """The batch through `streams.landing` (`warehouse.runtime.arrow_write`); None
        when that path cannot take it and nothing was committed."""
        from warehouse.runtime.arrow_write import write_arrow

        rules = self._arrow[1] if self._arrow is not None else None
        return write_arrow(self, df, batch_id, cache, rules)

    def write_one_pass(
        self, df: DataFrame, batch_id: int, cache: Callable[[DataFrame], DataFrame]
    ) -> Outcome:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        kafka = self.defn.spec.source.kafka is not None
        tag = f"{self.defn.name}_{batch_id}_{uuid.uuid4().hex[:8]}"
        schema = parse_seen = None
        good = df
        if kafka:
            schema = _payload_schema(self.project, self.defn)
            parse_seen = Observation(f"wh_parse_{tag}")
            good = self._parse(df, schema, observe=parse_seen).good
        checks = self._compiled_checks(good)
        checks_seen = None
        if checks is not None:
            checks_seen = Observation(f"wh_checks_{tag}")
            good = checks.observe(good, checks_seen)
        written_seen = Observation(f"wh_written_{tag}")
        good = good.observe(written_seen, F.count(F.lit(1)).alias("rows"))
        info = self.targets.commit_info(batch_id)
        version = self.targets.write(good, batch_id, info, quarantine=False)

        wait = 10.0 if version is not None else 0.0  # a skipped write ran nothing
        p, c, w = (_observed(o, wait=wait) for o in (parse_seen, checks_seen, written_seen))
        known = (not kafka or p is not None) and w is not None and (checks is None or c is not None)
        if not known:
            # Nothing lost if the write did not report its counts: a Kafka batch is read
            # again for its quarantine; a table's has none on this path.
            logger.warning(
                "table %s: batch %d: the write reported no counts; %s",
                self.defn.name,
                batch_id,
                "re-reading the batch for its quarantine"
                if kafka
                else "its progress line and quality events go without them",
            )
        want_parse = kafka and (not known or bool(p and p["flagged"]))
        want_checks = kafka and checks is not None and (not known or bool(c and c["quarantined"]))
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
                suspects=_suspects(
                    ([(p, "flagged_at")] if want_parse else [])
                    + ([(c, "quarantined_at")] if want_checks else [])
                ),
            )
        if checks is not None and c is not None:
            metrics = checks.observed_metrics(c, table=self.defn.name, batch_id=batch_id)
            self._quality_events(df.sparkSession, batch_id, metrics)
        written = int(w["rows"]) if w else 0
        if p:
            rows_in = int(p["records"])
        elif c and not kafka:
            rows_in = int(c["rows"])
        else:
            rows_in = written + quarantined
        return Outcome(
            rows_in=rows_in,
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
        suspects: set[int] | None,
    ) -> int:
        """Second pass of `write_one_pass`: the batch's quarantine rows, read again and
        parsed with the same payload `schema`. With `suspects` (the `record_hash`es of
        the records the first pass set aside), only those records are parsed again: the
        parse and the expectations judge each record alone, so they find the same rows
        among them as among the whole batch."""
        if suspects is not None:
            logger.info(
                "table %s: batch %d: %d record(s) of the batch read again for its quarantine",
                self.defn.name,
                batch_id,
                len(suspects),
            )
            # Read once and held (a few records): both kinds of quarantine rows are
            # parsed from them. Unheld, the union below would read the batch once per
            # kind, in two jobs at once.
            df = cache(_only(df, suspects))
            df.count()
        else:
            logger.info(
                "table %s: batch %d: the whole batch read again for its quarantine",
                self.defn.name,
                batch_id,
            )
        persist: Callable[[DataFrame], DataFrame] | None = None
        if want_parse and want_checks and suspects is None:
            # Both kinds come from one parse, persisted or the union would read the batch
            # twice; only its suspects are persisted (the records the parse flags and the
            # rows a quarantine expectation fails), not every record.
            from pyspark.sql import functions as F

            from streams.kafka import FLAGGED_COLUMN

            suspect = F.col(FLAGGED_COLUMN)
            for check in checks.checks:
                if check.on_violation == "quarantine":
                    suspect = suspect | check.failed_column()

            def held(frame: DataFrame) -> DataFrame:
                return cache(frame.where(suspect))

            persist = held
        parsed = self._parse(df, schema, persist=persist)
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
        *,
        rows: int | None = None,
    ) -> int:
        """Union the quarantine frames, write them if there is any row; the row count.
        `rows`: their number when the caller knows it exactly; else they are persisted
        and counted first."""
        q = union(parts)
        if rows is not None:
            if rows:
                self.targets.write(q, batch_id, info, quarantine=True)
            return rows
        q = cache(q)
        n = q.count()
        if n:
            self.targets.write(q, batch_id, info, quarantine=True)
        return n

    def write_cached(
        self,
        batch_df: DataFrame,
        batch_id: int,
        cache: Callable[[DataFrame], DataFrame],
        registered: list[str],
    ) -> Outcome:
        """The general path: the batch is persisted once parsed, transformed, judged
        whole (expectations that fail the batch do so before anything is written), then
        written, then its quarantine."""
        from warehouse.compile.transform import apply_transform

        spark = batch_df.sparkSession
        kafka = self.defn.spec.source.kafka
        # The source is read once: a Kafka batch is cached parsed (both the good rows and
        # the quarantine derive from it, one read and one parse), any other as it comes.
        df = batch_df if kafka is not None else cache(batch_df)
        checked = None
        try:
            quarantine: list[DataFrame] = []
            good = df
            malformed = 0
            if kafka is None:
                rows_in = df.count()
            else:
                from streams.kafka import persisted_counts

                staged: list[DataFrame] = []

                def stage(frame: DataFrame) -> DataFrame:
                    staged.append(cache(frame))
                    return staged[-1]

                parsed = self._parse(df, _payload_schema(self.project, self.defn), persist=stage)
                rows_in, malformed = persisted_counts(staged[0])
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
                # A table-sourced batch without checks writes what it read: no second job.
                written = rows_in if good is df else good.count()
            else:
                written, dropped = checked.kept, checked.dropped
                # Nothing set aside: `keep` is the batch already persisted (persisting it
                # again only makes Spark warn "Asked to cache already cached data").
                good = checked.keep if checked.keep.is_cached else cache(checked.keep)
                if checked.quarantine is not None:
                    quarantine.append(checked.quarantine)
            info = self.targets.commit_info(batch_id)
            version = self.targets.write(good, batch_id, info, quarantine=False)
            quarantined = 0
            # A clean batch (none malformed, none failing a quarantine expectation, both
            # counted already) has nothing to union, persist and count for the quarantine.
            if quarantine and malformed + (0 if checked is None else checked.quarantined):
                quarantined = self._write_quarantine(quarantine, batch_id, info, cache)
            if checked is not None:
                self._quality_events(spark, batch_id, checked.metrics)
        finally:
            if checked is not None:
                checked.unpersist()
        return Outcome(rows_in, written, quarantined, dropped, version)

    def _parse(self, df: DataFrame, schema: Any, **hooks: Any) -> Any:
        """`parse_kafka` of `df` as this table reads its records: its format, Kafka
        Connect envelopes when it takes its columns from them (`connect_schema`), and
        the sink's keys, so a record without one is quarantined, not the batch failed."""
        from streams.kafka import parse_kafka

        kafka = self.defn.spec.source.kafka
        assert kafka is not None
        return parse_kafka(
            df,
            format=kafka.format,
            schema=schema,
            connect=kafka.connect_schema,
            keys=self._parse_keys(schema),
            **hooks,
        )

    def _parse_keys(self, schema: Any) -> list[str]:
        """The sink keys the parse holds records to: an upsert's or SCD2's keys that are
        payload columns, when the parsed rows are what the sink writes (no transform,
        which would own the key columns)."""
        spec = self.defn.spec
        sink = spec.sink
        if (
            not isinstance(sink, UpsertSink | Scd2Sink)
            or schema is None
            or spec.transform is not None
            or self.defn.sql is not None
        ):
            return []
        from streams.kafka import as_struct

        kafka = spec.source.kafka
        assert kafka is not None
        names = as_struct(schema, kafka.format).fieldNames()
        return [k for k in sink.keys if k in names]

    def _parse_quarantine(self, bad: DataFrame, batch_id: int) -> DataFrame:
        from warehouse.quality.quarantine import quarantine_from_parse_errors

        return quarantine_from_parse_errors(bad, batch_id=batch_id)

    def _compiled_checks(self, df: Any) -> Any:
        """The table's row-level expectations compiled against the columns of `df` (a
        DataFrame or a StructType) once, or None without any."""
        if not self.defn.spec.expectations:
            return None
        if self._checks is None:
            from warehouse.quality.rows import compile_row_checks

            schema = df.schema if hasattr(df, "schema") else df
            self._checks = compile_row_checks(
                self.defn.spec.expectations, schema, table=self.defn.name
            )
        return None if self._checks.empty else self._checks

    def _row_checks(self, df: DataFrame, batch_id: int) -> Any:
        """Row-level expectations (warehouse.quality): a `CheckedBatch`, or None without any."""
        checks = self._compiled_checks(df)
        if checks is None:
            return None
        return checks.apply(df, table=self.defn.name, batch_id=batch_id)

    def _quality_events(self, spark: Any, batch_id: int, metrics: Any) -> None:
        from warehouse.quality.events import write_quality_events

        for m in metrics:
            if m["on_violation"] == "warn" and m["failed"]:
                self.warned[m["expectation"]] = self.warned.get(m["expectation"], 0) + int(
                    m["failed"]
                )
        write_quality_events(
            spark,
            str(self.project.root),
            metrics,
            app_id=self.targets.app_id(),
            batch_id=batch_id,
        )


def _suspects(wanted: list[tuple[dict[str, Any] | None, str]]) -> set[int] | None:
    """The record hashes the first pass listed under each (observed metrics, key) of
    `wanted` (`flagged_at` of the parse, `quarantined_at` of the expectations); None
    when one lists none (not observed, or more records than `streams.kafka.SUSPECTS_CAP`):
    the second pass then reads the whole batch again."""
    from streams.kafka import parse_hashes

    hashes: set[int] = set()
    for seen, key in wanted:
        listed = parse_hashes(seen.get(key)) if seen else None
        if listed is None:
            return None
        hashes |= listed
    return hashes


def _only(df: DataFrame, hashes: set[int]) -> DataFrame:
    """The records of the Kafka batch `df` whose `record_hash` is in `hashes` (a
    broadcast semi join, before any parse)."""
    from pyspark.sql import functions as F

    from streams.kafka import record_hash

    listed = df.sparkSession.createDataFrame([(h,) for h in sorted(hashes)], "__wh_hash long")
    at = record_hash(df["topic"], df["partition"], df["offset"])
    return df.join(F.broadcast(listed), at == listed["__wh_hash"], "left_semi")


def union(frames: list[DataFrame]) -> DataFrame:
    """The frames' rows in one frame, by column name."""
    out = frames[0]
    for other in frames[1:]:
        out = out.unionByName(other)
    return out
