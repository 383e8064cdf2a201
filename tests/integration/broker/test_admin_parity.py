"""Admin APIs that Kafka's command-line tools use, answered as Apache Kafka 4.x answers
them (the tools themselves run against both brokers in tests/integration/oracle/test_tools.py;
these pin the wire-level details the tools' output does not show)."""

from __future__ import annotations

import pytest
from kio.schema.describe_topic_partitions.v0 import request as dtp_req
from kio.schema.describe_topic_partitions.v0.response import DescribeTopicPartitionsResponse
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from tests.support.broker_clients import create_topic
from tests.support.broker_wire import Wire

pytestmark = [pytest.mark.kafka]


def _describe(wire: Wire, names: list[str], limit: int, cursor: tuple[str, int] | None = None):
    request = dtp_req.DescribeTopicPartitionsRequest(
        topics=tuple(dtp_req.TopicRequest(name=n) for n in names),
        response_partition_limit=i32(limit),
        cursor=dtp_req.Cursor(topic_name=cursor[0], partition_index=i32(cursor[1]))
        if cursor
        else None,
    )
    return wire.call(request, DescribeTopicPartitionsResponse)


def test_describe_topic_partitions_pages_with_a_cursor(broker, unique) -> None:
    """Kafka's DescribeTopicPartitionsRequestHandler: topics sorted by name, at most
    `response_partition_limit` partitions per answer, `next_cursor` naming the first
    partition left out; an unknown name is UNKNOWN_TOPIC_OR_PARTITION with no partitions;
    eligible leader replicas are empty lists, not null."""
    a, b = unique("dtp-a"), unique("dtp-b")
    create_topic(broker.bootstrap, a, partitions=3)
    create_topic(broker.bootstrap, b, partitions=2)
    missing = unique("dtp-missing")
    seen: list[tuple[str, int]] = []
    with Wire(broker.bootstrap) as wire:
        first = _describe(wire, [b, missing, a], limit=2)
        assert [t.name for t in first.topics] == [a]
        assert first.next_cursor is not None
        assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == (a, 2)
        seen += [(a, p.partition_index) for p in first.topics[0].partitions]
        part = first.topics[0].partitions[0]
        assert part.eligible_leader_replicas == () and part.last_known_elr == ()
        assert part.replica_nodes == part.isr_nodes == (part.leader_id,)
        second = _describe(wire, [b, missing, a], limit=2, cursor=(a, 2))
        assert [t.name for t in second.topics] == [a, b]
        assert second.next_cursor is not None
        assert (second.next_cursor.topic_name, second.next_cursor.partition_index) == (b, 1)
        for t in second.topics:
            seen += [(t.name, p.partition_index) for p in t.partitions]
        third = _describe(wire, [b, missing, a], limit=2, cursor=(b, 1))
        assert [t.name for t in third.topics] == [b, missing]
        assert third.next_cursor is None
        seen += [(b, p.partition_index) for p in third.topics[0].partitions]
        assert third.topics[1].error_code == ErrorCode.unknown_topic_or_partition
        assert third.topics[1].partitions == ()
    assert seen == [(a, 0), (a, 1), (a, 2), (b, 0), (b, 1)]


def test_describe_configs_synonyms_name_kafkas_broker_settings(broker_factory, unique) -> None:
    """Kafka's DescribeConfigs with include_synonyms: the topic override, then the broker's
    own setting under Kafka's broker name (STATIC_BROKER_CONFIG), then the built-in default
    (DEFAULT_CONFIG); no default for retention.ms; a non-overridden config's source is its
    first synonym's, so a broker-wide setting is not reported as a default."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

    server = broker_factory(**{"log.retention.ms": "3600000", "cleanup.policy": "compact"})
    topic = unique("synonyms")
    create_topic(server.bootstrap, topic, config={"retention.ms": "5000"})
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    # librdkafka asks for synonyms (include_synonyms=true) in every DescribeConfigs.
    [future] = admin.describe_configs([ConfigResource("topic", topic)]).values()
    configs = future.result(timeout=30)

    def synonyms(key: str) -> list[tuple[str, str, ConfigSource]]:
        return [(s.name, s.value, ConfigSource(s.source)) for s in configs[key].synonyms.values()]

    assert synonyms("retention.ms") == [
        ("retention.ms", "5000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "3600000", ConfigSource.STATIC_BROKER_CONFIG),
    ]
    # confluent-kafka keys synonyms by name, so of the STATIC and DEFAULT synonyms of
    # `log.cleanup.policy` it keeps the last (kafka-configs shows both, see test_tools.py).
    assert synonyms("cleanup.policy") == [
        ("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG),
    ]
    assert configs["cleanup.policy"].value == "compact"
    assert ConfigSource(configs["cleanup.policy"].source) is ConfigSource.STATIC_BROKER_CONFIG
    assert synonyms("max.message.bytes") == [
        ("message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG)
    ]
    assert ConfigSource(configs["max.message.bytes"].source) is ConfigSource.DEFAULT_CONFIG
