"""Kafka I/O for Spark: a Python stream source over confluent-kafka, parsing in Spark
expressions, and admin/produce helpers (`streams.kafka.admin`).

`read_kafka_stream` is the entry point by engine name; `kafka_engine(name)` gives the
engine itself (the Python or the native one, behind the `KafkaEngine` protocol, with
its capabilities) with its `available(spark)`.

Callers import from this package only, but for the Arrow code that must not import
Spark (`streams.landing.arrow_json` takes `columns` and `reasons` directly).
"""

from __future__ import annotations

from streams.kafka.admin import end_offsets, ensure_topic, log_offsets, produce, produce_json
from streams.kafka.columns import COORDINATES, KAFKA_COLUMNS
from streams.kafka.engine import KafkaEngine, kafka_engine, register_source
from streams.kafka.errors import (
    DataLossError,
    KafkaAdminError,
    KafkaConfigError,
    KafkaReadError,
    KafkaStreamError,
)
from streams.kafka.fetch import consumer_config, read_range
from streams.kafka.initial_offsets import (
    record_initial_offsets,
    recorded_federation_initial_offsets,
    recorded_initial_offsets,
)
from streams.kafka.offsets import OffsetRange, rewound
from streams.kafka.parse import as_struct, parse_kafka, required_fields
from streams.kafka.parse_connect import sample_connect_struct
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
    partition_reader,
    read_partition,
)
from streams.kafka.stream import read_kafka_stream

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
    "KafkaReadError",
    "KafkaStreamError",
    "OffsetRange",
    "ParsedFrames",
    "as_struct",
    "consumer_config",
    "end_offsets",
    "ensure_topic",
    "hashes_of",
    "input_partitions",
    "log_offsets",
    "kafka_engine",
    "parse_hashes",
    "parse_kafka",
    "partition_reader",
    "persisted_counts",
    "produce",
    "produce_json",
    "read_range",
    "read_kafka_stream",
    "read_partition",
    "record_hash",
    "record_initial_offsets",
    "recorded_federation_initial_offsets",
    "recorded_initial_offsets",
    "register_source",
    "required_fields",
    "rewound",
    "sample_connect_struct",
]
