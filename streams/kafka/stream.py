"""`read_kafka_stream`: one entry point for both engines.

`engine="python"` uses the bundled source (`streams.kafka.source`, pip-only);
`engine="native"` uses Spark's own `kafka` format when its jars are on the class path
(`streams.kafka.engine`). Both return the same columns, so callers never branch on
the engine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pyspark.sql import DataFrame, SparkSession

from streams.kafka.engine import KafkaRead, kafka_engine
from streams.kafka.errors import KafkaConfigError
from streams.kafka.offsets import parse_starting_offsets, to_json_dict
from streams.kafka.record_size import records_for_bytes
from streams.kafka.source import DEFAULT_ISOLATION_LEVEL, DEFAULT_MAX_OFFSETS_PER_TRIGGER


def native_kafka_available(spark: SparkSession) -> bool:
    """True when Spark's native Kafka source (spark-sql-kafka-0-10) is on the class path."""
    return kafka_engine("native").available(spark)


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
    max_bytes_per_trigger: int | None = None,
    on_data_loss: Literal["fail", "skip"] = "fail",
    client_config: Mapping[str, Any] | None = None,
    engine: Literal["python", "native"] = "python",
    isolation_level: Literal["read_committed", "read_uncommitted"] = DEFAULT_ISOLATION_LEVEL,
    split_offsets: int | None = None,
    max_tasks: int | None = None,
    include_headers: bool = True,
    checkpoint_location: str | None = None,
    cluster: str | None = None,
    record_wait: float = 0.0,
    wake_file: str | None = None,
) -> DataFrame:
    """A streaming DataFrame over Kafka with columns `key, value, topic, partition, offset,
    timestamp, timestamp_type, headers`.

    `topics` (a name or list) or `pattern` (a regex, new matching topics are picked up);
    `starting_offsets`: `earliest`, `latest` or `{"topic": {"0": 42}}` (-2 earliest,
    -1 latest); partitions found later start at earliest. `max_offsets_per_trigger`
    caps a micro-batch, shared fairly across partitions (Python engine: 1M records
    when not given, so a backlog is read in bounded batches; Spark's has no default).
    `max_bytes_per_trigger` caps it in bytes of keys and values too, turned into records
    by the size of the topics' newest records when the stream is made
    (`streams.kafka.record_size`, both engines). `client_config`: any
    librdkafka property (SASL/SSL ...). Isolation is read_committed by default.
    Python engine only: ranges longer than `split_offsets` (200k) are split, and the
    ranges of a batch are packed into at most `max_tasks` tasks (default: Spark's
    default parallelism), each reading its partitions with one consumer.
    `include_headers=False` leaves the `headers` column out (Spark's `includeHeaders`):
    a query that never looks at headers reads faster without them.
    `checkpoint_location`: the checkpoint of the query this stream feeds. The Python
    source records its resolved initial offsets there and reuses them when the query
    restarts before batch 0 committed; without it `latest` (or `earliest` after
    retention) is resolved again at such a restart, and records can be skipped or
    repeated. Spark's own source does this by itself.
    `cluster`: the name of the cluster `bootstrap` is, when the query reads the same
    topics from several (federation): each cluster's Python source then keeps its own
    initial offsets under the checkpoint (Spark's keeps one file per source anyway).
    `record_wait`: seconds a trigger that finds nothing new may wait for the next record
    (and answer as soon as it is in), on an engine whose source `waits_for_records`
    (0: none waits; Spark polls the source `spark.sql.streaming.pollingDelay` apart);
    `wake_file`: a local file whose appearance ends such a wait within a second (a stop
    creates it).
    """
    names = _topics_arg(topics)
    if (names is None) == (pattern is None):
        raise KafkaConfigError(
            "read_kafka_stream needs exactly one of `topics` or `pattern`; "
            f"got topics=`{topics}`, pattern=`{pattern}`.",
            option="topics",
        )
    if record_wait < 0:
        raise KafkaConfigError(
            f"record_wait must be 0 or more seconds, got `{record_wait}`.", option="record_wait"
        )
    if on_data_loss not in ("fail", "skip"):
        raise KafkaConfigError(
            f"on_data_loss must be `fail` or `skip`, got `{on_data_loss}`.", option="on_data_loss"
        )
    if max_bytes_per_trigger is not None:
        if max_bytes_per_trigger <= 0:
            raise KafkaConfigError(
                f"max_bytes_per_trigger must be positive, got `{max_bytes_per_trigger}`.",
                option="max_bytes_per_trigger",
            )
        by_bytes = records_for_bytes(
            max_bytes_per_trigger,
            bootstrap=bootstrap,
            topics=names,
            pattern=pattern,
            client_config=client_config,
        )
        if by_bytes is not None:
            limit = max_offsets_per_trigger or DEFAULT_MAX_OFFSETS_PER_TRIGGER
            max_offsets_per_trigger = min(limit, by_bytes)
    start = parse_starting_offsets(starting_offsets)
    start_text = (
        start.mode if start.mode != "explicit" else json.dumps(to_json_dict(start.explicit or {}))
    )
    request = KafkaRead(
        bootstrap=bootstrap,
        topics=names,
        pattern=pattern,
        starting=start_text,
        max_offsets_per_trigger=max_offsets_per_trigger,
        on_data_loss=on_data_loss,
        client_config={k: str(v) for k, v in (client_config or {}).items()},
        isolation_level=isolation_level,
        include_headers=include_headers,
        split_offsets=split_offsets,
        max_tasks=max_tasks,
        checkpoint_location=str(checkpoint_location) if checkpoint_location else None,
        cluster=cluster,
        record_wait=record_wait,
        wake_file=wake_file,
    )
    return kafka_engine(engine).read_stream(spark, request)
