"""Where the publisher keeps its position, on Apache Kafka with offsets that expire.

Kafka deletes the committed offsets of a group with no members `offsets.retention.minutes`
after their commit (7 days by default). The publisher's position must outlive that: a
publisher started after the expiry publishes only the versions that came since, and a
read_committed consumer sees each change once. The node here keeps offsets one minute
and looks for expired ones every second; a canary group's offset, committed with the
publish, shows that Kafka did expire offsets before the publisher starts again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from streams.cdc import publish_changes
from tests.integration.cdc import tables
from tests.integration.cdc.helpers import decoded, expected_changes, read_records, sort_changes
from tests.support.apache_kafka import ApacheKafka, ApacheKafkaError

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

RETENTION = {"offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "1000"}


@pytest.fixture(scope="module")
def expiring_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """One Apache Kafka node that expires a memberless group's offsets after a minute."""
    try:
        kafka = ApacheKafka(tmp_path_factory.mktemp("kafka-expiring"), overrides=RETENTION)
        kafka.start()
    except ApacheKafkaError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield kafka
    finally:
        kafka.stop()


def _commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def _committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        consumer.close()


def test_the_position_outlives_kafkas_offset_retention(
    expiring_kafka: ApacheKafka, tmp_path: Path
) -> None:
    bootstrap = expiring_kafka.bootstrap
    suffix = uuid.uuid4().hex[:8]
    path, topic, name = str(tmp_path / "users"), f"mv.users-{suffix}", f"ads_users-{suffix}"
    canary = f"canary-{suffix}"
    tables.create(path)
    tables.upsert(path, [tables.row(i, f"u{i}", 100 * i) for i in (1, 2, 3)])
    first = tables.upsert(path, [tables.row(2, "u2-renamed", 250)])
    kw = {"bootstrap": bootstrap, "topic": topic, "keys": tables.KEYS, "table": name}
    assert publish_changes(path, **kw).last_version == first
    _commit(bootstrap, canary, topic, 1)
    assert _committed(bootstrap, canary, topic) == 1

    deadline = time.monotonic() + 240
    while _committed(bootstrap, canary, topic) >= 0:
        assert time.monotonic() < deadline, "Kafka did not expire the canary's offset in 4 min"
        time.sleep(2)

    last = tables.upsert(path, [tables.row(4, "u4", 400)])
    result = publish_changes(path, **kw)
    assert (result.first_version, result.last_version, result.records) == (last, last, 1)
    published = decoded(read_records(bootstrap, topic))
    assert sort_changes(published) == sort_changes(expected_changes(path, 0, last, tables.KEYS))
