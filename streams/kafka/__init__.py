"""Kafka I/O for Spark: a Python stream source over confluent-kafka, parsing in Spark
expressions, and admin/produce helpers (`streams.kafka.admin`)."""

from __future__ import annotations

from streams.kafka.errors import (
    DataLossError,
    KafkaAdminError,
    KafkaConfigError,
    KafkaReadError,
    KafkaStreamError,
)
from streams.kafka.parse import ParsedFrames, parse_kafka
from streams.kafka.stream import native_kafka_available, read_kafka_stream, register_source

__all__ = [
    "DataLossError",
    "KafkaAdminError",
    "KafkaConfigError",
    "KafkaReadError",
    "KafkaStreamError",
    "ParsedFrames",
    "native_kafka_available",
    "parse_kafka",
    "read_kafka_stream",
    "register_source",
]
