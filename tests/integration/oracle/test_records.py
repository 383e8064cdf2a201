"""Records as confluent-kafka sees them on both brokers: keys, values, offsets,
timestamps, headers, compression, and the offsets ListOffsets answers."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from tests.integration.oracle.clients import admin, consumer, create_topic, produce, read_to_end
from tests.integration.oracle.differential import on_both, unique

pytestmark = pytest.mark.kafka

T0 = 1_700_000_000_000


def records_roundtrip(bootstrap: str) -> dict[str, Any]:
    topic = unique("records")
    create_topic(bootstrap, topic, 3)
    records = [
        {
            "partition": 0,
            "key": b"k1",
            "value": b"v1",
            "timestamp": T0,
            "headers": [("h", b"1"), ("h", b"2"), ("empty", b"")],
        },
        {"partition": 0, "key": None, "value": b"no key", "timestamp": T0 + 1},
        {
            "partition": 1,
            "key": b"tomb",
            "value": None,
            "timestamp": T0 + 2,
            "headers": [("null-value", None)],
        },
        # an older timestamp after a newer one: CreateTime keeps what the producer set
        {"partition": 1, "key": b"", "value": b"", "timestamp": T0 - 60_000},
        {"partition": 2, "key": b"big", "value": bytes(range(256)) * 400, "timestamp": T0 + 3},
        {
            "partition": 2,
            "key": "ünïcode".encode(),
            "value": b"x" * 10,
            "timestamp": T0 + 4,
            "headers": [("ключ", "значение".encode())],
        },
    ]
    deliveries = produce(bootstrap, topic, records)
    return {"deliveries": deliveries, **read_to_end(bootstrap, topic, 3)}


def test_records_round_trip(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, records_roundtrip)
    assert len(on_kafka["records"]) == 6 and on_kafka["ends"][2] == (0, 2)
    assert on_bundled == on_kafka


def compressed_batches(bootstrap: str) -> dict[str, Any]:
    """One producer per codec, each writing a batch of 50 records: the offsets the broker
    assigns inside compressed batches and the records read back."""
    topic = unique("codecs")
    create_topic(bootstrap, topic, 1)
    deliveries = {}
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        records = [
            {
                "key": f"{codec}-{i}".encode(),
                "value": f"value {i} ".encode() * 20,
                "timestamp": T0 + i,
            }
            for i in range(50)
        ]
        deliveries[codec] = produce(
            bootstrap, topic, records, **{"compression.type": codec, "linger.ms": 50}
        )
    return {"deliveries": deliveries, **read_to_end(bootstrap, topic, 1)}


def test_compressed_batches(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, compressed_batches)
    assert len(on_kafka["records"]) == 250
    assert on_bundled == on_kafka


def log_append_time(bootstrap: str) -> list[tuple[Any, ...]]:
    """A LogAppendTime topic: the broker's clock replaces the producer's timestamp."""
    topic = unique("append-time")
    create_topic(bootstrap, topic, 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    deliveries = produce(bootstrap, topic, [{"value": b"a", "timestamp": T0}, {"value": b"b"}])
    after = int(time.time() * 1000)
    read = read_to_end(bootstrap, topic, 1)["records"]
    seen = [(d[0], d[2], d[3][0], before <= d[3][1] <= after) for d in deliveries]
    seen += [(r[1], r[4][0], before <= r[4][1] <= after) for r in read]
    return seen


def test_log_append_time(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, log_append_time)
    assert len(on_kafka) == 4
    assert on_bundled == on_kafka


def list_offsets(bootstrap: str) -> dict[str, Any]:
    """Offsets by timestamp (the consumer's offsets_for_times and the admin's
    ListOffsets: earliest, latest, max timestamp, a timestamp) after a delete-records."""
    topic = unique("offsets")
    create_topic(bootstrap, topic, 1)
    stamps = [T0 + 1000, T0 + 3000, T0 + 2000, T0 + 4000, T0 + 5000]
    produce(bootstrap, topic, [{"value": b"r%d" % i, "timestamp": t} for i, t in enumerate(stamps)])
    c = consumer(bootstrap)
    try:
        # one partition per request: librdkafka merges duplicates of a partition
        by_time = [
            c.offsets_for_times([TopicPartition(topic, 0, t)], timeout=10)[0].offset
            for t in (0, T0 + 1000, T0 + 1500, T0 + 2500, T0 + 9000)
        ]
        watermarks = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()
    a = admin(bootstrap)
    specs = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "max_timestamp": OffsetSpec.max_timestamp(),
        "at_2500": OffsetSpec.for_timestamp(T0 + 2500),
    }
    listed = {}
    for name, spec in specs.items():
        result = a.list_offsets({TopicPartition(topic, 0): spec})
        info = next(iter(result.values())).result(timeout=10)
        listed[name] = (info.offset, info.timestamp)
    deleted = a.delete_records([TopicPartition(topic, 0, 2)])
    low = [f.result(timeout=10).low_watermark for f in deleted.values()]
    after_delete = read_to_end(bootstrap, topic, 1)
    return {
        "by_time": by_time,
        "watermarks": watermarks,
        "listed": listed,
        "deleted_to": low,
        "after_delete": after_delete,
    }


def test_list_offsets(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, list_offsets)
    assert on_kafka["by_time"][1] == 0 and on_kafka["watermarks"] == (0, 5)
    assert on_bundled == on_kafka
