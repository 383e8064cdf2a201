"""librdkafka (confluent-kafka) against a real broker process: produce, consume, admin."""

from __future__ import annotations

import time
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)
from confluent_kafka.error import KafkaError

from tests.support.broker_clients import consume_all, create_topic, produce

pytestmark = [pytest.mark.kafka]


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_every_acks_setting_stores_every_record_once(broker, unique, acks: str) -> None:
    topic = unique("acks")
    create_topic(broker.bootstrap, topic, partitions=2)
    records = [(None, f"value-{i}".encode()) for i in range(300)]
    delivered = produce(broker.bootstrap, topic, records, acks=acks)
    assert len(delivered) == 300
    got = consume_all(broker.bootstrap, topic, [0, 1], expected=300)
    assert sorted(v for _, _, _, v in got) == sorted(v for _, v in records)
    by_partition: dict[int, list[int]] = defaultdict(list)
    for p, offset, _, _ in got:
        by_partition[p].append(offset)
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))  # contiguous, from 0, no duplicates
    if acks != "0":  # acks=0 deliveries carry no offsets
        assert sorted(delivered) == sorted((p, o) for p, o, _, _ in got)


def test_keyed_records_land_where_the_client_put_them_in_order(broker, unique) -> None:
    topic = unique("keyed")
    create_topic(broker.bootstrap, topic, partitions=4)
    records = [(f"user-{i % 13}".encode(), f"{i}".encode()) for i in range(260)]
    delivered = produce(broker.bootstrap, topic, records, acks="all")
    got = consume_all(broker.bootstrap, topic, range(4), expected=260)
    stored = {(p, o): (k, v) for p, o, k, v in got}
    # every record is exactly at the (partition, offset) the client was told
    assert [stored[d] for d in delivered] == records
    partitions_of_key: dict[bytes, set[int]] = defaultdict(set)
    sequence: dict[bytes, list[int]] = defaultdict(list)
    for p, _o, k, v in sorted(got):
        partitions_of_key[k].add(p)
        sequence[k].append(int(v))
    assert all(len(ps) == 1 for ps in partitions_of_key.values())
    for k, values in sequence.items():
        assert values == sorted(values), f"key {k!r} read out of order"
    assert len({p for ps in partitions_of_key.values() for p in ps}) > 1


def test_list_offsets_earliest_latest_and_by_timestamp(broker, unique) -> None:
    from confluent_kafka import Producer

    topic = unique("times")
    create_topic(broker.bootstrap, topic, partitions=1)
    # A day ago: inside retention (older records may be deleted while the test runs).
    base = (int(time.time()) // 60 - 24 * 60) * 60_000
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce(topic, value=b"x", timestamp=base + i * 1000)
        producer.flush(30)  # one batch per record: timestamps inside batches are exercised below
    for i in range(10, 20):
        producer.produce(topic, value=b"y", timestamp=base + i * 1000)
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g")})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30) == (0, 20)
        for i in (0, 3, 9, 12, 19):
            found = consumer.offsets_for_times([TopicPartition(topic, 0, base + i * 1000)], 30)
            assert found[0].offset == i
        between = consumer.offsets_for_times([TopicPartition(topic, 0, base + 4500)], 30)
        assert between[0].offset == 5
        after = consumer.offsets_for_times([TopicPartition(topic, 0, base + 10**9)], 30)
        assert after[0].offset == -1  # no such record: end
    finally:
        consumer.close()


def test_admin_creates_deletes_topics_and_adds_partitions(broker, unique) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = unique("admin")
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)

    again = admin.create_topics([NewTopic(topic, 2, 1)])[topic]
    with pytest.raises(KafkaException) as info:
        again.result(30)
    assert info.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    bad = admin.create_topics([NewTopic("bad/../name", 1, 1)])["bad/../name"]
    with pytest.raises(KafkaException) as info:
        bad.result(30)
    assert info.value.args[0].code() == KafkaError.TOPIC_EXCEPTION

    rf = unique("rf")
    with pytest.raises(KafkaException) as info:
        admin.create_topics([NewTopic(rf, 1, 3)])[rf].result(30)
    assert info.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR

    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
    meta = admin.list_topics(topic, timeout=30)
    assert sorted(meta.topics[topic].partitions) == [0, 1, 2, 3]
    with pytest.raises(KafkaException) as info:
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
    assert info.value.args[0].code() == KafkaError.INVALID_PARTITIONS

    delivered = produce(broker.bootstrap, topic, [(None, b"on-3")], partition=3)
    assert delivered == [(3, 0)]

    admin.delete_topics([topic])[topic].result(30)
    assert topic not in admin.list_topics(timeout=30).topics
    with pytest.raises(KafkaException) as info:
        admin.delete_topics([topic])[topic].result(30)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def _describe(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(30)


def test_describe_and_incrementally_alter_topic_configs(broker, unique) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = unique("configs")
    admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "3600000"})])[topic].result(
        30
    )

    entries = _describe(admin, topic)
    assert entries["retention.ms"].value == "3600000"
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["cleanup.policy"].value == "delete"
    assert entries["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value

    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.bytes", "524288", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)
    entries = _describe(admin, topic)
    assert entries["retention.bytes"].value == "1048576"
    assert entries["segment.bytes"].value == "524288"
    assert entries["cleanup.policy"].value == "compact"
    assert entries["retention.ms"].value == "604800000"  # back to the default
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    append = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND)
        ],
    )
    admin.incremental_alter_configs([append])[append].result(30)
    assert _describe(admin, topic)["cleanup.policy"].value == "compact,delete"

    bad = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException) as info:
        admin.incremental_alter_configs([bad])[bad].result(30)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "retention.ms" in info.value.args[0].str()
    assert _describe(admin, topic)["retention.bytes"].value == "1048576"  # unchanged


def test_auto_create_follows_broker_config(broker_factory, unique) -> None:
    on = broker_factory(**{"num.partitions": 3})
    topic = unique("auto")
    produce(on.bootstrap, topic, [(None, b"first")])
    meta = AdminClient({"bootstrap.servers": on.bootstrap}).list_topics(topic, timeout=30)
    assert len(meta.topics[topic].partitions) == 3

    off = broker_factory(**{"auto.create.topics.enable": "false"})
    meta = AdminClient({"bootstrap.servers": off.bootstrap}).list_topics(topic, timeout=30)
    assert meta.topics[topic].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_log_append_time_topic_stamps_records_on_arrival(broker, unique) -> None:
    import time

    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Producer

    topic = unique("appendtime")
    create_topic(broker.bootstrap, topic, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    stamps: list[tuple[int, int]] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    producer.produce(
        topic, value=b"old", timestamp=1_000, on_delivery=lambda e, m: stamps.append(m.timestamp())
    )
    assert producer.flush(30) == 0
    after = int(time.time() * 1000)
    assert stamps[0][0] == TIMESTAMP_LOG_APPEND_TIME and before <= stamps[0][1] <= after

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g")})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        msg = None
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                break
        assert msg is not None and msg.value() == b"old"
        assert msg.timestamp() == stamps[0]
    finally:
        consumer.close()
