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
