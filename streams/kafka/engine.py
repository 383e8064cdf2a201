"""The two Kafka engines behind one small interface.

- `PythonKafka` (pip-only): the bundled source (`streams.kafka.source`) over
  confluent-kafka, registered as the `warehouse_kafka` Python data source;
- `NativeKafka`: Spark's own `kafka` format, when the spark-sql-kafka-0-10 jars are on
  the class path.

Both return the same columns, so a caller picks one with `kafka_engine(name)` and
never branches on it; `read_kafka_stream` (`streams.kafka.stream`) checks the options
once and hands them over as a `KafkaRead`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from pyspark.sql import DataFrame, SparkSession

from streams.kafka.errors import KafkaConfigError
from streams.kafka.java_options import (
    SHADED_PREFIX,
    for_spark_source,
    java_client_options,
    with_failover_timeouts,
)
from streams.kafka.source import DEFAULT_MAX_OFFSETS_PER_TRIGGER
from streams.sessions import connect_has_format, default_parallelism, is_connect

logger = logging.getLogger(__name__)

NATIVE_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


@dataclass(frozen=True)
class KafkaRead:
    """A checked request for a Kafka stream: exactly one of `topics` or `pattern`;
    `starting` is the starting offsets as the source option text."""

    bootstrap: str
    topics: list[str] | None
    pattern: str | None
    starting: str
    max_offsets_per_trigger: int | None
    on_data_loss: Literal["fail", "skip"]
    client_config: Mapping[str, str]
    isolation_level: Literal["read_committed", "read_uncommitted"]
    include_headers: bool
    split_offsets: int | None = None
    """Python engine only: ranges longer than this are split."""
    max_tasks: int | None = None
    """Python engine only: the most tasks a batch's ranges are packed into."""
    checkpoint_location: str | None = None
    """Python engine only: the query's checkpoint, where the source records its resolved
    initial offsets (Spark's own source finds its checkpoint itself)."""
    cluster: str | None = None
    """Python engine only: the cluster this source reads when a query reads the same
    topics from several (federation); it keys the source's initial offsets, so that
    each cluster's source keeps its own."""
    record_wait: float = 0.0
    """Where the engine `waits_for_records`: seconds a trigger that finds nothing new
    waits for the next record."""
    wake_file: str | None = None
    """A local file whose appearance ends such a wait at once (a stop creates it)."""


class KafkaEngine(Protocol):
    """What the runtime needs of a Kafka engine, and what sets the engines apart
    (capabilities, as Spark's `SupportsXxx` mixins declare them)."""

    name: Literal["python", "native"]
    reads_in_python_tasks: bool
    """Its reads run Python in Spark's tasks, so wherever it runs the executors have the
    project's Python environment (a path that adds Python work to the tasks asks for
    nothing new)."""
    waits_for_records: bool
    """Its source can wait in a trigger for the next record (`KafkaRead.record_wait`) and
    start the batch when it is in, instead of being asked again a polling delay later."""

    def available(self, spark: SparkSession) -> bool:
        """Whether this engine can run on `spark`."""
        ...

    def read_stream(self, spark: SparkSession, request: KafkaRead) -> DataFrame:
        """A streaming DataFrame with columns `key, value, topic, partition, offset,
        timestamp, timestamp_type` (and `headers` when `request.include_headers`)."""
        ...


def register_source(spark: SparkSession) -> None:
    """Register the Python Kafka source with `spark` (once per session)."""
    from streams._datasources import register_once
    from streams.kafka.source import KafkaDataSource

    register_once(spark, KafkaDataSource)


class PythonKafka:
    """The bundled source: runs wherever pip installed us."""

    name: Literal["python", "native"] = "python"
    reads_in_python_tasks = True
    waits_for_records = True

    def available(self, spark: SparkSession) -> bool:
        return True

    def read_stream(self, spark: SparkSession, request: KafkaRead) -> DataFrame:
        register_source(spark)
        reader = (
            spark.readStream.format("warehouse_kafka")
            .option("bootstrap", request.bootstrap)
            .option("starting_offsets", request.starting)
            .option("on_data_loss", request.on_data_loss)
            .option("isolation_level", request.isolation_level)
            .option("client_config", json.dumps(dict(request.client_config)))
            .option("include_headers", "true" if request.include_headers else "false")
        )
        reader = (
            reader.option("topics", ",".join(request.topics))
            if request.topics
            else reader.option("pattern", request.pattern)
        )
        if request.max_offsets_per_trigger is not None:
            reader = reader.option(
                "max_offsets_per_trigger", str(int(request.max_offsets_per_trigger))
            )
        if request.split_offsets is not None:
            reader = reader.option("split_offsets", str(int(request.split_offsets)))
        if request.checkpoint_location:
            reader = reader.option("checkpoint_location", request.checkpoint_location)
        if request.cluster:
            reader = reader.option("cluster", request.cluster)
        if request.record_wait > 0:
            reader = reader.option("record_wait_ms", str(round(request.record_wait * 1000)))
            if request.wake_file:
                reader = reader.option("wake_file", request.wake_file)
        tasks = request.max_tasks or default_parallelism(spark)
        reader = reader.option("max_tasks", str(int(tasks)))
        return reader.load()


OFFSET_LOOKUPS = 18
"""Attempts of the native source's offset lookup (Spark's `fetchOffset.numRetries`, 3 by
default), each bounded by `java_options.FAILOVER_TIMEOUT_MS`."""


class NativeKafka:
    """Spark's `kafka` format: needs spark-sql-kafka-0-10 on the session's class path."""

    name: Literal["python", "native"] = "native"
    reads_in_python_tasks = False
    waits_for_records = False  # Spark polls its own source

    def available(self, spark: SparkSession) -> bool:
        """True when Spark's native Kafka source (spark-sql-kafka-0-10) is on the class path
        (of the Connect server, for a Connect session)."""
        if is_connect(spark):
            return connect_has_format(spark, "kafka")
        try:
            jvm = spark._jvm  # type: ignore[attr-defined]
            if jvm is None:
                return False
            loader = jvm.Thread.currentThread().getContextClassLoader()
            jvm.java.lang.Class.forName(NATIVE_PROVIDER, False, loader)
            return True
        except Exception as e:  # noqa: BLE001 - Py4J wraps ClassNotFoundException; any failure means "absent"
            logger.debug("native kafka source not available: %s", e)
            return False

    def read_stream(self, spark: SparkSession, request: KafkaRead) -> DataFrame:
        if not self.available(spark):
            raise KafkaConfigError(
                "engine=`native` needs Spark's Kafka source (`spark-sql-kafka-0-10` jars) on "
                "the class path; it is not. Use engine=`python` or add the jars to the session.",
                option="engine",
            )
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", request.bootstrap)
            .option("startingOffsets", request.starting)
            .option("failOnDataLoss", "true" if request.on_data_loss == "fail" else "false")
            .option("includeHeaders", "true" if request.include_headers else "false")
            .option("kafka.isolation.level", request.isolation_level)
        )
        reader = (
            reader.option("subscribe", ",".join(request.topics))
            if request.topics
            else reader.option("subscribePattern", request.pattern)
        )
        # Bounded batches by default, as on the Python engine: Spark's own source has no
        # default and would read a backlog of any size as one micro-batch.
        limit = request.max_offsets_per_trigger or DEFAULT_MAX_OFFSETS_PER_TRIGGER
        reader = reader.option("maxOffsetsPerTrigger", str(int(limit)))
        # A dead partition leader: each offset lookup gives up after the client's shorter
        # timeouts, and more lookups keep Spark's patience in all (3 x 60 s).
        reader = reader.option("fetchOffset.numRetries", str(OFFSET_LOOKUPS))
        options = with_failover_timeouts(
            for_spark_source(
                java_client_options(request.client_config, shaded=_shaded_kafka_client(spark))
            )
        )
        for k, v in options.items():
            reader = reader.option(f"kafka.{k}", v)
        # Spark names it `timestampType`; both engines give the columns the protocol names.
        return reader.load().withColumnRenamed("timestampType", "timestamp_type")


def _shaded_kafka_client(spark: SparkSession) -> bool:
    """True where the Kafka client classes are relocated under `kafkashaded.` (Databricks)."""
    try:
        spark._jvm.java.lang.Class.forName(  # type: ignore[union-attr]
            SHADED_PREFIX + "org.apache.kafka.common.security.plain.PlainLoginModule"
        )
        return True
    except Exception:  # noqa: BLE001 - Py4J wraps ClassNotFoundException; absent means not shaded
        return False


_ENGINES: dict[str, KafkaEngine] = {"python": PythonKafka(), "native": NativeKafka()}


def kafka_engine(name: str) -> KafkaEngine:
    """The engine called `name` (`python` or `native`)."""
    try:
        return _ENGINES[name]
    except KeyError:
        raise KafkaConfigError(
            f"engine must be `python` or `native`, got `{name}`.", option="engine"
        ) from None
