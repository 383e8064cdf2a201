"""A table's input, each kind its own type: `KafkaInput` (topics, and how their records
parse) or `TableInput` (another table's versions, and the streams joined to it).

Made once when a table compiles (`warehouse.compile.program`); a batch only uses
them. No Spark import at module import.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from warehouse.compile.errors import CompileError
from warehouse.spec.table import KafkaSource, Scd2Sink, TableSource, UpsertSink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from streams.kafka import FetchOptions, ParsedFrames
    from warehouse.compile.engines import ResolvedEngines
    from warehouse.spec.model import LoadedProject
    from warehouse.spec.table import TableDefinition

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClusterRead:
    """One cluster a federated table reads its topics from: its name and how to reach it."""

    name: str
    bootstrap: str
    client_config: dict[str, str]


@dataclass(frozen=True)
class KafkaInput:
    """Kafka topics as the table reads them, and how each batch's records parse.

    `payload`: the payload schema (a Spark DDL string: `schemas/NAME`, or the records'
    Connect schema for `connect_schema`), None for `raw`. `keys`: the sink keys the
    parse holds records to (`keys_held`). `bootstrap`, `client_config`: the (first)
    cluster's; `federation`: every cluster of a federated table (`source.kafka.clusters`)
    in the query's source order, empty for a table that reads one."""

    table: str
    source: KafkaSource
    bootstrap: str
    client_config: dict[str, str]
    payload: str | None
    keys: tuple[str, ...]
    federation: tuple[ClusterRead, ...] = ()

    def parse(self, df: DataFrame, **hooks: Any) -> ParsedFrames:
        """`parse_kafka` of `df` as this table reads its records: its format, Kafka
        Connect envelopes when it takes its columns from them (`connect_schema`), and
        the sink's keys, so a record without one is quarantined, not the batch failed.
        `hooks`: `persist` and `observe` (`parse_kafka`)."""
        from streams.kafka import parse_kafka

        return parse_kafka(
            df,
            format=self.source.format,
            schema=self.payload,
            connect=self.source.connect_schema,
            keys=list(self.keys),
            **hooks,
        )

    def payload_struct(self) -> StructType | None:
        """The payload schema as a StructType (None for `raw`)."""
        from streams.kafka import as_struct

        return None if self.payload is None else as_struct(self.payload, self.source.format)

    def fetch_options(self) -> FetchOptions:
        """How tasks of the table's own read the batch's ranges when Spark's source planned
        them (`streams.landing`): the broker and client settings the stream reads with,
        and the isolation level `read_kafka_stream` reads with."""
        from streams.kafka import DEFAULT_BATCH_RECORDS, DEFAULT_ISOLATION_LEVEL, FetchOptions

        return FetchOptions(
            self.bootstrap,
            self.client_config,
            DEFAULT_ISOLATION_LEVEL,
            self.source.on_data_loss,
            DEFAULT_BATCH_RECORDS,
        )

    def stream(
        self,
        spark: SparkSession,
        engines: ResolvedEngines,
        *,
        checkpoint: str,
        record_wait: float = 0.0,
        wake_file: str | None = None,
    ) -> DataFrame:
        """The topics as a streaming DataFrame of Kafka records: parse, transform and
        checks run per batch, where bad records can go to quarantine.

        A federation reads each cluster with a Kafka source of its own, the record's
        cluster in a `cluster` column, all unioned: the query's checkpoint keeps each
        source's offsets (one line per source in its offset log), so each cluster's
        partitions have their own position and a batch is exactly its sources' ranges."""
        from pyspark.sql import functions as F

        if not self.federation:
            return self._read(
                spark,
                engines,
                checkpoint,
                self.bootstrap,
                self.client_config,
                record_wait=record_wait,
                wake_file=wake_file,
            )
        frames = [
            self._read(spark, engines, checkpoint, c.bootstrap, c.client_config, c.name).withColumn(
                "cluster", F.lit(c.name)
            )
            for c in self.federation
        ]
        out = frames[0]
        for frame in frames[1:]:
            out = out.unionByName(frame)
        return out

    def _read(
        self,
        spark: SparkSession,
        engines: ResolvedEngines,
        checkpoint: str,
        bootstrap: str,
        client_config: dict[str, str],
        cluster: str | None = None,
        *,
        record_wait: float = 0.0,
        wake_file: str | None = None,
    ) -> DataFrame:
        from streams.kafka import read_kafka_stream

        k = self.source
        return read_kafka_stream(
            spark,
            bootstrap=bootstrap,
            topics=k.topic_list or None,
            pattern=k.pattern,
            starting_offsets=k.starting_offsets,
            max_offsets_per_trigger=k.max_offsets_per_trigger,
            max_bytes_per_trigger=k.max_bytes_per_trigger,
            on_data_loss=k.on_data_loss,
            client_config=client_config,
            engine=engines.kafka.name,
            # Only `raw` keeps headers in the table; the parsed formats drop them.
            include_headers=k.format == "raw",
            checkpoint_location=checkpoint,
            cluster=cluster,
            record_wait=record_wait,
            wake_file=wake_file,
        )


@dataclass(frozen=True)
class TableInput:
    """Another table's versions as a stream (`read: append|changes`), and the tables
    joined to it as streams (`join_streams`), by their Delta paths."""

    source: TableSource
    path: str
    join_paths: dict[str, str]

    def stream(
        self,
        spark: SparkSession,
        engines: ResolvedEngines,
        *,
        commit_wait: float = 0.0,
        wake_file: str | None = None,
    ) -> DataFrame:
        """The source table's versions as a stream; a trigger that finds nothing new waits
        up to `commit_wait` for its next commit, the wake file, or a new commit of a table
        joined as a stream (which Spark asks in the same trigger)."""
        from streams.delta import read_delta_stream

        return read_delta_stream(
            spark,
            self.path,
            read=self.source.read,
            max_versions_per_trigger=self.source.max_versions_per_trigger,
            engine=engines.delta.name,
            commit_wait=commit_wait,
            wake_file=wake_file,
            watch_also=list(self.join_paths.values()) if commit_wait else [],
        )

    def joined(self, spark: SparkSession, engines: ResolvedEngines) -> dict[str, DataFrame]:
        """Each joined table as a stream, with its watermark, by table name."""
        from streams.delta import read_delta_stream

        out = {}
        for j in self.source.join_streams:
            js = read_delta_stream(spark, self.join_paths[j.table], engine=engines.delta.name)
            if j.watermark:
                js = js.withWatermark(j.watermark.column, j.watermark.delay)
            out[j.table] = js
        return out


def kafka_input(
    project: LoadedProject, defn: TableDefinition, source: KafkaSource, bootstrap: str | None
) -> KafkaInput:
    """The table's `KafkaInput`; a `connect_schema` table reads its columns from the newest
    record's Connect schema here, once per query start (a change of the source table's
    columns needs a restart). `bootstrap`: the default cluster's, as resolved; a table on
    a named cluster reads that cluster's."""
    kafka = project.config.kafka
    default = bootstrap
    reads = []
    for cluster in source.cluster_list:
        servers = kafka.bootstrap_of(cluster, default)
        if not servers:
            raise CompileError(
                f"Table `{defn.name}` reads Kafka but no bootstrap was resolved; "
                "set `kafka.bootstrap` in conf/<env>.yml.",
                table=defn.name,
            )
        reads.append(
            ClusterRead(cluster, servers, kafka.client_config(source.options, cluster=cluster))
        )
    bootstrap, client_config = reads[0].bootstrap, reads[0].client_config
    payload = defn.payload_ddl
    if source.connect_schema:
        payload = _connect_schema_ddl(defn, source, bootstrap, client_config)
    elif payload is None and source.schema_ is not None:
        schema = project.payload_schemas[source.schema_]
        to_ddl = getattr(schema, "to_ddl", None)
        payload = to_ddl() if callable(to_ddl) else schema
    return KafkaInput(
        table=defn.name,
        source=source,
        bootstrap=bootstrap,
        client_config=client_config,
        payload=payload,
        keys=tuple(_keys_held(defn, source, payload)),
        federation=tuple(reads) if source.federated else (),
    )


def _keys_held(defn: TableDefinition, source: KafkaSource, payload: str | None) -> list[str]:
    """The sink keys the parse holds records to: an upsert's or SCD2's keys that are
    payload columns, when the parsed rows are what the sink writes (no transform, which
    would own the key columns)."""
    sink = defn.spec.sink
    if (
        not isinstance(sink, UpsertSink | Scd2Sink)
        or payload is None
        or defn.spec.transform is not None
        or defn.sql is not None
    ):
        return []
    from streams.kafka import as_struct

    names = as_struct(payload, source.format).fieldNames()
    return [k for k in sink.keys if k in names]


def _connect_schema_ddl(
    defn: TableDefinition, source: KafkaSource, bootstrap: str, client_config: dict[str, str]
) -> str:
    from streams.kafka import KafkaStreamError, sample_connect_struct

    assert source.format in ("debezium-json", "upsert-json")
    try:
        struct = sample_connect_struct(
            bootstrap,
            source.topic_list,
            client_config=client_config,
            format="upsert-json" if source.format == "upsert-json" else "debezium-json",
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
    return ddl


def table_input(project: LoadedProject, source: TableSource) -> TableInput:
    return TableInput(
        source=source,
        path=str(project.table_path(source.table)),
        join_paths={j.table: str(project.table_path(j.table)) for j in source.join_streams},
    )
