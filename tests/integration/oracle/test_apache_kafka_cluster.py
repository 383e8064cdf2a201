"""The three-node Apache Kafka fixture is the cluster it claims to be: every partition on
three replicas, all in sync, min.insync.replicas=2, and acks=all writes go through."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, NewTopic

from tests.integration.oracle.clients import admin, error_name, produce, read_to_end
from tests.integration.oracle.differential import unique
from tests.support.apache_kafka import ApacheKafka

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_three_node_cluster(apache_kafka_cluster: ApacheKafka) -> None:
    bootstrap = apache_kafka_cluster.bootstrap
    topic = unique("replicated")
    a = admin(bootstrap)
    assert sorted(a.list_topics(timeout=10).brokers) == [1, 2, 3]
    a.create_topics([NewTopic(topic, 2, 3)])[topic].result(timeout=30)
    # CreateTopics answers once the controller has the topic; each broker learns it
    # from the metadata log a moment later, so the broker asked next may not know it yet.
    deadline = time.monotonic() + 30
    while True:
        partitions = a.list_topics(topic, timeout=10).topics[topic].partitions
        seen = {p: (len(m.replicas), len(m.isrs)) for p, m in partitions.items()}
        if seen == {0: (3, 3), 1: (3, 3)} or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert seen == {0: (3, 3), 1: (3, 3)}
    # The broker that answers DescribeConfigs is not the one that answered Metadata, and it
    # too may not have the topic yet: ask again until it has, within the same deadline.
    while True:
        future = next(iter(a.describe_configs([ConfigResource("topic", topic)]).values()))
        try:
            configs = future.result(timeout=10)
            break
        except KafkaException as e:
            if error_name(e) != "UNKNOWN_TOPIC_OR_PART" or time.monotonic() > deadline:
                raise
        time.sleep(0.2)
    assert configs["min.insync.replicas"].value == "2"
    reports = produce(
        bootstrap, topic, [{"partition": p, "value": b"v"} for p in (0, 1)], acks="all"
    )
    assert [r[:3] for r in reports] == [(None, 0, 0), (None, 1, 0)]
    assert len(read_to_end(bootstrap, topic, 2)["records"]) == 2
