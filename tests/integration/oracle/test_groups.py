"""Consumer groups as confluent-kafka sees them on both brokers: committed offsets and
their metadata, where a member resumes, and assignments that cover every partition once."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition

from tests.integration.oracle.clients import admin, consumer, create_topic, produce
from tests.integration.oracle.differential import on_both, unique

pytestmark = pytest.mark.kafka


def committed_offsets(bootstrap: str) -> dict[str, Any]:
    """Commit offsets with metadata for two of three partitions, read them back through
    the consumer and the admin API, then resume a new member of the group from them."""
    topic, group = unique("commits"), unique("group")
    create_topic(bootstrap, topic, 3)
    produce(
        bootstrap,
        topic,
        [{"partition": p, "value": b"%d-%d" % (p, i)} for p in range(3) for i in range(4)],
    )
    c = consumer(bootstrap, group)
    try:
        c.commit(
            offsets=[TopicPartition(topic, 0, 2, "first"), TopicPartition(topic, 1, 4, "")],
            asynchronous=False,
        )
        c.commit(offsets=[TopicPartition(topic, 0, 3, "second")], asynchronous=False)
        read_back = [
            (tp.partition, tp.offset, tp.metadata, tp.error)
            for tp in c.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
        ]
    finally:
        c.close()
    a = admin(bootstrap)
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(3)])
    listed = a.list_consumer_group_offsets([request])[group].result(timeout=10)
    via_admin = sorted((tp.partition, tp.offset, tp.metadata) for tp in listed.topic_partitions)
    # a new member resumes at the committed offsets, and from the start where none is
    resumed = consumer(bootstrap, group)
    try:
        resumed.assign([TopicPartition(topic, p) for p in range(3)])
        first: dict[int, int] = {}
        deadline = time.monotonic() + 20
        while len(first) < 2 and time.monotonic() < deadline:
            msg = resumed.poll(0.2)
            if msg is not None and not msg.error():
                first.setdefault(msg.partition(), msg.offset())
    finally:
        resumed.close()
    return {"read_back": read_back, "via_admin": via_admin, "resumed_at": first}


def test_committed_offsets(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, committed_offsets)
    assert on_kafka["read_back"][0][1:3] == (3, "second") and on_kafka["resumed_at"] == {0: 3, 2: 0}
    assert on_bundled == on_kafka


def _assigned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def _poll_until(members: list[Consumer], done: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not done():
        for m in members:
            m.poll(0.1)


def group_assignment(bootstrap: str) -> dict[str, Any]:
    """Two members share five partitions, then one leaves and the other takes all five;
    the group as the admin API describes it at each step."""
    topic, group = unique("assign"), unique("group")
    create_topic(bootstrap, topic, 5)
    members = [consumer(bootstrap, group) for _ in range(2)]
    a = admin(bootstrap)
    try:
        for m in members:
            m.subscribe([topic])

        def covered() -> bool:
            sets = [_assigned(m) for m in members]
            return (
                all(sets) and sum(len(s) for s in sets) == 5 and set().union(*sets) == set(range(5))
            )

        _poll_until(members, covered)
        sets = [_assigned(m) for m in members]
        both = {
            "sizes": sorted(len(s) for s in sets),
            "union": sorted(set().union(*sets)),
            "overlap": bool(sets[0] & sets[1]),
        }
        described = a.describe_consumer_groups([group])[group].result(timeout=10)
        both["group"] = (
            described.state.name,
            described.partition_assignor,
            sorted(len(m.assignment.topic_partitions) for m in described.members),
        )
        members[1].close()
        _poll_until(members[:1], lambda: _assigned(members[0]) == set(range(5)))
        alone = sorted(_assigned(members[0]))
    finally:
        members[0].close()
    described = a.describe_consumer_groups([group])[group].result(timeout=10)
    return {
        "two_members": both,
        "one_member": alone,
        "after_close": (described.state.name, len(described.members)),
    }


def test_group_assignment(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, group_assignment)
    assert on_kafka["two_members"]["union"] == [0, 1, 2, 3, 4]
    assert on_bundled == on_kafka
