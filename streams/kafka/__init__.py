"""Kafka I/O for Spark: a Python stream source over confluent-kafka, parsing in Spark
expressions, and admin/produce helpers (`streams.kafka.admin`).

`read_kafka_stream` is the entry point by engine name; `kafka_engine(name)` gives the
engine itself (`PythonKafka`, `NativeKafka`, behind the `KafkaEngine` protocol) with
its `available(spark)`.
"""

from __future__ import annotations

from streams.kafka._fetch import consumer_config, read_range
from streams.kafka.admin import end_offsets, ensure_topic, produce, produce_json
from streams.kafka.columns import COORDINATES, KAFKA_COLUMNS
from streams.kafka.engine import (
    KafkaEngine,
    KafkaRead,
    NativeKafka,
    PythonKafka,
    kafka_engine,
    register_source,
)
from streams.kafka.errors import (
    DataLossError,
    KafkaAdminError,
    KafkaConfigError,
    KafkaReadError,
    KafkaStreamError,
)
from streams.kafka.offsets import OffsetRange
from streams.kafka.parse import as_struct, parse_kafka, required_fields
from streams.kafka.parse_connect import connect_struct, sample_connect_struct
from streams.kafka.parse_frames import (
    FLAGGED_COLUMN,
    SUSPECTS_CAP,
    ParsedFrames,
    hashes_of,
    parse_hashes,
    persisted_counts,
    record_hash,
)
from streams.kafka.source import (
    DEFAULT_BATCH_RECORDS,
    DEFAULT_ISOLATION_LEVEL,
    SCHEMA,
    SCHEMA_WITHOUT_HEADERS,
    FetchOptions,
    KafkaInputPartition,
    input_partitions,
    read_partition,
)
from streams.kafka.stream import native_kafka_available, read_kafka_stream

__all__ = [
    "COORDINATES",
    "DEFAULT_BATCH_RECORDS",
    "DEFAULT_ISOLATION_LEVEL",
    "FLAGGED_COLUMN",
    "KAFKA_COLUMNS",
    "SCHEMA",
    "SCHEMA_WITHOUT_HEADERS",
    "SUSPECTS_CAP",
    "DataLossError",
    "FetchOptions",
    "KafkaAdminError",
    "KafkaConfigError",
    "KafkaEngine",
    "KafkaInputPartition",
    "KafkaRead",
    "KafkaReadError",
    "KafkaStreamError",
    "NativeKafka",
    "OffsetRange",
    "ParsedFrames",
    "PythonKafka",
    "as_struct",
    "connect_struct",
    "consumer_config",
    "end_offsets",
    "ensure_topic",
    "hashes_of",
    "input_partitions",
    "kafka_engine",
    "native_kafka_available",
    "parse_hashes",
    "parse_kafka",
    "persisted_counts",
    "produce",
    "produce_json",
    "read_range",
    "read_kafka_stream",
    "read_partition",
    "record_hash",
    "register_source",
    "required_fields",
    "sample_connect_struct",
]
