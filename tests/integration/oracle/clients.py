"""confluent-kafka helpers of the oracle scenarios: each returns what the client observed,
normalized to plain tuples (no topic names, no leader epochs, no wall-clock times)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

QUIET = {"log_level": 0}
"""Clients of the error scenarios meet failures on purpose; librdkafka need not log them."""


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **QUIET})


def create_topic(
    bootstrap: str, topic: str, partitions: int = 1, config: dict[str, str] | None = None
) -> None:
    client = admin(bootstrap)  # held: the futures fail when their client is collected
    # The scenarios' record timestamps are from 2023, older than the default 7-day
    # retention: a broker's retention check (every 5 minutes, on both) would delete the
    # segment mid-scenario. Their topics keep everything.
    config = {"retention.ms": "-1", **(config or {})}
    futures = client.create_topics([NewTopic(topic, partitions, 1, config=config)])
    futures[topic].result(timeout=30)


def error_name(err: KafkaError | BaseException | None) -> str | None:
    """`UNKNOWN_TOPIC_OR_PART` for a KafkaError, a KafkaException wrapping one, or None."""
    if err is None:
        return None
    if isinstance(err, KafkaException):
        err = err.args[0]
    if isinstance(err, KafkaError):
        return err.name()
    return type(err).__name__


def future_error(future: Any, timeout: float = 30) -> str | None:
    """The Kafka error name an admin future ends with, None when it succeeds."""
    try:
        future.result(timeout=timeout)
    except KafkaException as e:
        return error_name(e)
    return None


def headers(msg: Message) -> list[tuple[str, bytes | None]]:
    return [(k, v) for k, v in (msg.headers() or [])]


def record(msg: Message) -> tuple[Any, ...]:
    """(partition, offset, key, value, (timestamp type, timestamp), headers)."""
    return (msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp(), headers(msg))


def produce(
    bootstrap: str, topic: str, records: Iterable[dict[str, Any]], **conf: Any
) -> list[tuple[Any, ...]]:
    """Produce each record (keyword arguments of `Producer.produce`), wait for every
    delivery report; returns (error name, partition, offset, timestamp) per record in order."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET, **conf})
    reports: list[tuple[Any, ...] | None] = []

    def report(i: int):
        def cb(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                reports[i] = (error_name(err), msg.partition(), None, None)
            else:
                reports[i] = (None, msg.partition(), msg.offset(), msg.timestamp())

        return cb

    for i, kwargs in enumerate(records):
        reports.append(None)
        producer.produce(topic, on_delivery=report(i), **kwargs)
        producer.poll(0)
    left = producer.flush(30)
    assert left == 0, f"{left} record(s) still undelivered after 30 s"
    return list(reports)


def consumer(bootstrap: str, group: str = "oracle-reader", **conf: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 50,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            **QUIET,
            **conf,
        }
    )


def read_to_end(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    isolation: str = "read_uncommitted",
    timeout: float = 20,
) -> dict[str, Any]:
    """Every record of `topic` from offset 0 up to the end the consumer's isolation level
    sees (the high watermark, or the last stable offset under read_committed):
    {"ends": {partition: (low, high)}, "records": [record(...), ...]}."""
    c = consumer(bootstrap, **{"isolation.level": isolation, "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        ends = {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            for p in range(partitions)
        }
        out: list[tuple[Any, ...]] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error() and msg.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(msg.partition())
            elif msg.error():
                out.append(("error", error_name(msg.error())))
            else:
                at_end.discard(msg.partition())
                out.append(record(msg))
        return {"ends": ends, "records": sorted(out, key=lambda r: (r[0], r[1]))}
    finally:
        c.close()
