"""kafka-python 3 (a second, independent client) against a real broker process."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewPartitions,
    NewTopic,
)
from kafka.errors import TopicAlreadyExistsError

pytestmark = [pytest.mark.kafka]


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_produce_and_read_back_with_kafka_python(broker, unique, acks) -> None:
    topic = unique("kp")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 3, 1)])
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks, linger_ms=5)
        futures = [
            producer.send(topic, key=f"k{i % 5}".encode(), value=f"v{i}".encode())
            for i in range(120)
        ]
        producer.flush(30)
        metas = [f.get(30) for f in futures]
        producer.close()

        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            enable_auto_commit=False,
            consumer_timeout_ms=5000,
        )
        parts = [TopicPartition(topic, p) for p in range(3)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        got = {}
        while len(got) < 120:
            batch = consumer.poll(timeout_ms=5000)
            if not batch:
                break
            for records in batch.values():
                for r in records:
                    got[(r.partition, r.offset)] = (r.key, r.value)
        consumer.close()
        assert sorted(v for _, v in got.values()) == sorted(f"v{i}".encode() for i in range(120))
        if acks != 0:
            for i, meta in enumerate(metas):
                assert got[(meta.partition, meta.offset)] == (
                    f"k{i % 5}".encode(),
                    f"v{i}".encode(),
                )
    finally:
        admin.close()


def test_kafka_python_admin_topics_partitions_and_configs(broker, unique) -> None:
    topic = unique("kpadmin")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"retention.ms": "120000"})])
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(topic, 1, 1)])
        admin.create_partitions({topic: NewPartitions(total_count=2)})
        described = admin.describe_topics([topic])
        assert len(described[0]["partitions"]) == 2
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        entry = configs["topic"][topic]["retention.ms"]
        assert entry["value"] == "120000"
        assert entry["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert topic in admin.list_topics()
        admin.delete_topics([topic])
        assert topic not in admin.list_topics()
    finally:
        admin.close()


def test_offsets_for_times_with_kafka_python(broker, unique) -> None:
    topic = unique("kptimes")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    # A day ago: inside retention (older records may be deleted while the test runs).
    base = (int(time.time()) // 60 - 24 * 60) * 60_000
    for i in range(5):
        producer.send(topic, value=b"t", timestamp_ms=base + i * 10).get(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        found = consumer.offsets_for_times({tp: base + 15})
        assert found[tp].offset == 2 and found[tp].timestamp == base + 20
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 5}
    finally:
        consumer.close()
