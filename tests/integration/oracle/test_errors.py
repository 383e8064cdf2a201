"""Bad requests: the error codes confluent-kafka reports from both brokers for unknown
topics, invalid topic creations, records over the size limit and fetches out of range."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicCollection, TopicPartition
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic

from tests.integration.oracle.clients import (
    admin,
    consumer,
    create_topic,
    future_error,
    produce,
)
from tests.integration.oracle.differential import on_both, unique

pytestmark = pytest.mark.kafka


def unknown_topic(bootstrap: str) -> dict[str, Any]:
    name = unique("missing")
    a = admin(bootstrap)
    return {
        "describe_topics": future_error(a.describe_topics(TopicCollection([name]))[name]),
        "delete_topics": future_error(a.delete_topics([name])[name]),
        "describe_configs": future_error(
            next(iter(a.describe_configs([ConfigResource("topic", name)]).values()))
        ),
        "create_partitions": future_error(a.create_partitions([NewPartitions(name, 3)])[name]),
    }


def test_unknown_topic(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, unknown_topic)
    assert on_kafka["describe_topics"] == "UNKNOWN_TOPIC_OR_PART"
    assert on_bundled == on_kafka


def invalid_topics(bootstrap: str) -> dict[str, Any]:
    """CreateTopics with bad names, counts and configs; one name per request so each
    answer is the broker's verdict on that one topic."""
    existing = unique("exists")
    create_topic(bootstrap, existing, 1)
    a = admin(bootstrap)
    cases = {
        "space": NewTopic("bad name", 1, 1),
        "slash": NewTopic("bad/name", 1, 1),
        "dot": NewTopic(".", 1, 1),
        "dotdot": NewTopic("..", 1, 1),
        "too_long": NewTopic("x" * 250, 1, 1),
        "exists": NewTopic(existing, 1, 1),
        "zero_partitions": NewTopic(unique("zero"), 0, 1),
        "replication_too_high": NewTopic(unique("rf"), 1, 3),
        "bad_config_value": NewTopic(unique("cfg"), 1, 1, config={"cleanup.policy": "bogus"}),
        "unknown_config": NewTopic(unique("cfg"), 1, 1, config={"no.such.config": "1"}),
    }
    seen = {}
    for label, topic in cases.items():
        seen[label] = future_error(a.create_topics([topic])[topic.topic])
    probe = unique("validate-only")
    seen["validate_only"] = future_error(
        a.create_topics([NewTopic(probe, 2, 1)], validate_only=True)[probe]
    )
    seen["validate_only_created"] = probe in a.list_topics(timeout=10).topics
    return seen


def test_invalid_topics(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, invalid_topics)
    assert on_kafka["space"] == "TOPIC_EXCEPTION" and on_kafka["exists"] == "TOPIC_ALREADY_EXISTS"
    assert on_bundled == on_kafka


def record_too_large(bootstrap: str) -> list[tuple[Any, ...]]:
    """A topic whose max.message.bytes is 2048: a larger record is refused, the records
    around it are written at consecutive offsets."""
    topic = unique("too-large")
    create_topic(bootstrap, topic, 1, {"max.message.bytes": "2048"})
    out = []
    for size in (100, 5000, 100):
        # one producer per record: the refused batch holds only the large record
        out += produce(bootstrap, topic, [{"value": b"x" * size, "timestamp": 1}])
    return out


def test_record_too_large(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, record_too_large)
    assert on_kafka[1][0] == "MSG_SIZE_TOO_LARGE"
    assert on_bundled == on_kafka


def fetch_out_of_range(bootstrap: str) -> dict[str, Any]:
    """A fetch from past the end with auto.offset.reset=error reports the error; one from
    inside the log reads on."""
    topic = unique("range")
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, [{"value": b"r%d" % i} for i in range(3)])
    c = consumer(bootstrap, **{"auto.offset.reset": "error"})
    seen: dict[str, Any] = {}
    try:
        for label, start in (("past_end", 10), ("inside", 1)):
            c.assign([TopicPartition(topic, 0, start)])
            got: list[Any] = []
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and len(got) < 2:
                msg = c.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    got.append(msg.error().name())
                    if msg.error().code() == KafkaError._AUTO_OFFSET_RESET:
                        # librdkafka names the broker's error in the message text
                        got.append("Offset out of range" in msg.error().str())
                        break
                else:
                    got.append(msg.offset())
            seen[label] = got
            c.unassign()
    finally:
        c.close()
    return seen


def test_fetch_out_of_range(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, fetch_out_of_range)
    assert on_kafka["inside"] == [1, 2] and on_kafka["past_end"] == ["_AUTO_OFFSET_RESET", True]
    assert on_bundled == on_kafka
