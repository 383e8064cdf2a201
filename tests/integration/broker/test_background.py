"""Retention and compaction run in the background on their configured intervals."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tests.support.broker_clients import consume_all, create_topic

pytestmark = [pytest.mark.kafka]


def _earliest(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[0]
    finally:
        consumer.close()


def test_retention_deletes_old_segments_on_its_interval(broker_factory, unique) -> None:
    proc = broker_factory(**{"log.retention.check.interval.ms": 200})
    topic = unique("retention")
    create_topic(proc.bootstrap, topic, config={"retention.ms": "-1", "segment.bytes": "2048"})
    producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 0})
    old = int(time.time() * 1000) - 3_600_000
    for i in range(40):  # an hour old
        producer.produce(topic, value=b"o" * 200, timestamp=old + i)
        producer.flush(30)
    for _ in range(5):  # fresh records
        producer.produce(topic, value=b"n" * 200)
    assert producer.flush(30) == 0
    assert _earliest(proc.bootstrap, topic) == 0

    # retention starts when the topic's config says so: one tick expires every old segment
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)
    deadline = time.monotonic() + 60
    while _earliest(proc.bootstrap, topic) == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    start = _earliest(proc.bootstrap, topic)
    assert 0 < start <= 40
    left = consume_all(
        proc.bootstrap, topic, [0], expected=45 - start, **{"auto.offset.reset": "earliest"}
    )
    assert [o for _, o, _, _ in left] == list(range(start, 45))
    assert [v[:1] for _, _, _, v in left][-5:] == [b"n"] * 5


def test_compaction_keeps_the_last_value_per_key(broker_factory, unique) -> None:
    proc = broker_factory(**{"log.cleaner.backoff.ms": 200})
    topic = unique("compact")
    create_topic(
        proc.bootstrap,
        topic,
        config={"cleanup.policy": "compact", "segment.bytes": "1024", "min.compaction.lag.ms": "0"},
    )
    producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 0})
    for round_ in range(20):
        for k in range(5):
            producer.produce(topic, key=f"k{k}".encode(), value=f"{round_}".encode())
        producer.flush(30)
    assert producer.flush(30) == 0

    deadline = time.monotonic() + 60
    records = consume_all(proc.bootstrap, topic, [0], expected=100, timeout=5)
    while len(records) == 100 and time.monotonic() < deadline:
        time.sleep(0.3)
        records = consume_all(proc.bootstrap, topic, [0], expected=100, timeout=3)
    assert len(records) < 100
    last = {}
    for _, offset, key, value in records:
        last[key] = (offset, value)
    assert {k: v for k, (_, v) in last.items()} == {f"k{k}".encode(): b"19" for k in range(5)}
    offsets = [o for _, o, _, _ in records]
    assert offsets == sorted(offsets)  # original offsets kept, in order


def _wakes(pid: int) -> int:
    """How often the broker's event loop thread (its main thread) has gone to sleep."""
    status = open(f"/proc/{pid}/task/{pid}/status").read()
    return int(status.split("voluntary_ctxt_switches:")[1].split()[0])


def test_an_idle_coordinator_ticks_once_a_second_and_a_group_still_works(
    broker_factory, unique
) -> None:
    """With no group member and no open transaction the coordinator's clock ticks once a
    second, not every `coordinator.tick.ms` (100): an idle broker's loop sleeps between
    its ticks and the log flusher's, about two wakes a second (it woke eleven times a
    second before). A group's first member, on the idle coordinator, still joins, gets its
    partitions and reads (its requests wake the clock)."""
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("reads the loop thread's wakes from /proc")
    proc = broker_factory()
    pid = proc.pid
    assert pid is not None
    time.sleep(1.5)  # its start's own work done
    before = _wakes(pid)
    time.sleep(3.0)
    assert _wakes(pid) - before <= 15

    topic = unique("idle-group")
    create_topic(proc.bootstrap, topic)
    producer = Producer({"bootstrap.servers": proc.bootstrap})
    producer.produce(topic, value=b"v")
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": proc.bootstrap, "group.id": unique("g"),
         "auto.offset.reset": "earliest", "session.timeout.ms": 6000}
    )  # fmt: skip
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        got = None
        while got is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got = msg.value()
        assert got == b"v"
        assert consumer.assignment() == [TopicPartition(topic, 0)]
    finally:
        consumer.close()
