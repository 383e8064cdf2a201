"""`read_kafka_stream`: one entry point for both engines.

`engine="python"` uses the bundled source (`streams.kafka.source`, pip-only);
`engine="native"` uses Spark's own `kafka` format when its jars are on the class path.
Both return the same columns, so callers never branch on the engine.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pyspark.sql import DataFrame, SparkSession

from streams.kafka.errors import KafkaConfigError
from streams.kafka.java_options import SHADED_PREFIX, java_client_options
from streams.kafka.offsets import parse_starting_offsets, to_json_dict

logger = logging.getLogger(__name__)

NATIVE_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"

_registered: set[int] = set()


def native_kafka_available(spark: SparkSession) -> bool:
    """True when Spark's native Kafka source (spark-sql-kafka-0-10) is on the class path."""
    try:
        jvm = spark._jvm  # type: ignore[attr-defined]
        if jvm is None:
            return False
        loader = jvm.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(NATIVE_PROVIDER, False, loader)
        return True
    except Exception as e:  # Py4J wraps ClassNotFoundException; any failure means "absent"
        logger.debug("native kafka source not available: %s", e)
        return False


def register_source(spark: SparkSession) -> None:
    """Register the Python Kafka source with `spark` (once per session)."""
    from streams.kafka.source import KafkaDataSource

    key = id(spark)
    if key not in _registered:
        spark.dataSource.register(KafkaDataSource)
        _registered.add(key)


def _topics_arg(topics: str | Sequence[str] | None) -> list[str] | None:
    if topics is None:
        return None
    names = [topics] if isinstance(topics, str) else list(topics)
    names = [n.strip() for t in names for n in t.split(",") if n.strip()]
    return names or None


def read_kafka_stream(
    spark: SparkSession,
    *,
    bootstrap: str,
    topics: str | Sequence[str] | None = None,
    pattern: str | None = None,
    starting_offsets: str | Mapping[str, Any] = "earliest",
    max_offsets_per_trigger: int | None = None,
    on_data_loss: Literal["fail", "skip"] = "fail",
    client_config: Mapping[str, Any] | None = None,
    engine: Literal["python", "native"] = "python",
    isolation_level: Literal["read_committed", "read_uncommitted"] = "read_committed",
    split_offsets: int | None = None,
    max_tasks: int | None = None,
    include_headers: bool = True,
) -> DataFrame:
    """A streaming DataFrame over Kafka with columns `key, value, topic, partition, offset,
    timestamp, timestamp_type, headers`.

    `topics` (a name or list) or `pattern` (a regex, new matching topics are picked up);
    `starting_offsets`: `earliest`, `latest` or `{"topic": {"0": 42}}` (-2 earliest,
    -1 latest); partitions found later start at earliest. `max_offsets_per_trigger`
    caps a micro-batch, shared fairly across partitions. `client_config`: any
    librdkafka property (SASL/SSL ...). Isolation is read_committed by default.
    Python engine only: ranges longer than `split_offsets` (200k) are split, and the
    ranges of a batch are packed into at most `max_tasks` tasks (default: Spark's
    default parallelism), each reading its partitions with one consumer.
    `include_headers=False` leaves the `headers` column out (Spark's `includeHeaders`):
    a query that never looks at headers reads faster without them.
    """
    names = _topics_arg(topics)
    if (names is None) == (pattern is None):
        raise KafkaConfigError(
            "read_kafka_stream needs exactly one of `topics` or `pattern`; "
            f"got topics=`{topics}`, pattern=`{pattern}`.",
            option="topics",
        )
    if on_data_loss not in ("fail", "skip"):
        raise KafkaConfigError(
            f"on_data_loss must be `fail` or `skip`, got `{on_data_loss}`.", option="on_data_loss"
        )
    start = parse_starting_offsets(starting_offsets)
    start_text = (
        start.mode if start.mode != "explicit" else json.dumps(to_json_dict(start.explicit or {}))
    )
    client = {k: str(v) for k, v in (client_config or {}).items()}
    if engine == "native":
        return _native(
            spark,
            bootstrap=bootstrap,
            names=names,
            pattern=pattern,
            start_text=start_text,
            max_offsets=max_offsets_per_trigger,
            on_data_loss=on_data_loss,
            client=client,
            isolation_level=isolation_level,
            include_headers=include_headers,
        )
    if engine != "python":
        raise KafkaConfigError(
            f"engine must be `python` or `native`, got `{engine}`.", option="engine"
        )
    register_source(spark)
    reader = (
        spark.readStream.format("warehouse_kafka")
        .option("bootstrap", bootstrap)
        .option("starting_offsets", start_text)
        .option("on_data_loss", on_data_loss)
        .option("isolation_level", isolation_level)
        .option("client_config", json.dumps(client))
        .option("include_headers", "true" if include_headers else "false")
    )
    reader = (
        reader.option("topics", ",".join(names)) if names else reader.option("pattern", pattern)
    )
    if max_offsets_per_trigger is not None:
        reader = reader.option("max_offsets_per_trigger", str(int(max_offsets_per_trigger)))
    if split_offsets is not None:
        reader = reader.option("split_offsets", str(int(split_offsets)))
    tasks = max_tasks or spark.sparkContext.defaultParallelism
    reader = reader.option("max_tasks", str(int(tasks)))
    return reader.load()


def _native(
    spark: SparkSession,
    *,
    bootstrap: str,
    names: list[str] | None,
    pattern: str | None,
    start_text: str,
    max_offsets: int | None,
    on_data_loss: str,
    client: Mapping[str, str],
    isolation_level: str,
    include_headers: bool,
) -> DataFrame:
    if not native_kafka_available(spark):
        raise KafkaConfigError(
            "engine=`native` needs Spark's Kafka source (`spark-sql-kafka-0-10` jars) on the "
            "class path; it is not. Use engine=`python` or add the jars to the session.",
            option="engine",
        )
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("startingOffsets", start_text)
        .option("failOnDataLoss", "true" if on_data_loss == "fail" else "false")
        .option("includeHeaders", "true" if include_headers else "false")
        .option("kafka.isolation.level", isolation_level)
    )
    reader = (
        reader.option("subscribe", ",".join(names))
        if names
        else reader.option("subscribePattern", pattern)
    )
    if max_offsets is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(int(max_offsets)))
    try:
        options = java_client_options(client, shaded=_shaded_kafka_client(spark))
    except ValueError as e:
        raise KafkaConfigError(str(e), option="kafka.client") from e
    for k, v in options.items():
        reader = reader.option(f"kafka.{k}", v)
    return reader.load()


def _shaded_kafka_client(spark: SparkSession) -> bool:
    """True where the Kafka client classes are relocated under `kafkashaded.` (Databricks)."""
    try:
        spark._jvm.java.lang.Class.forName(  # type: ignore[union-attr]
            SHADED_PREFIX + "org.apache.kafka.common.security.plain.PlainLoginModule"
        )
        return True
    except Exception:  # Py4J wraps ClassNotFoundException; absent means not shaded
        return False
