"""Small helpers for the coordination tests: produce, read back, end offsets (real clients)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

FAST_GROUP = {
    # short timeouts so rebalances are noticed within a second, not ten
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 300,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "fetch.wait.max.ms": 100,
}


def create_topic(bootstrap: str, topic: str, partitions: int, **conf: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **conf})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
    )
    futures[topic].result(30)


def produce(
    bootstrap: str, topic: str, values: Iterable[tuple[int, bytes]], **conf: object
) -> None:
    """``values``: ``(partition, value)`` pairs; raises if any record is not acknowledged."""
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for partition, value in values:
        producer.produce(
            topic, value=value, partition=partition, on_delivery=lambda e, m: e and errors.append(e)
        )
    assert producer.flush(30) == 0, "records still in flight after 30 s"
    assert not errors, errors


def read_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    isolation: str = "read_committed",
    timeout: float = 20,
) -> list[tuple[int, int, bytes]]:
    """Every record of ``topic`` up to its current end, as ``(partition, offset, value)``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused-reader",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
        consumer.assign(tps)
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
        out: list[tuple[int, int, bytes]] = []
        done: set[int] = set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in range(partitions):
                if (
                    p not in done
                    and consumer.position([TopicPartition(topic, p)])[0].offset >= ends[p]
                ):
                    done.add(p)
            if len(done) == partitions:
                break
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.partition(), msg.offset(), msg.value()))
        return out
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-ends"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()
