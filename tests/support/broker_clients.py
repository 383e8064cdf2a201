"""Small helpers over the real clients (confluent-kafka) used by the tests: create
topics, produce, read back, end offsets and committed offsets."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

FAST_GROUP = {
    # short timeouts so rebalances are noticed within a second, not ten
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 300,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "fetch.wait.max.ms": 100,
}


def create_topic(
    bootstrap: str,
    topic: str,
    partitions: int = 1,
    config: dict | None = None,
    **client_conf: str,
) -> None:
    """Create `topic` with `config`; `client_conf` configures the admin client (SASL)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **client_conf})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])
    futures[topic].result(timeout=30)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None]],
    *,
    partition: int | None = None,
    **config: object,
) -> list[tuple[int, int]]:
    """Produce and wait for every delivery; returns (partition, offset) per record in order."""
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, **config}
    producer = Producer({k.replace("_", "."): v for k, v in conf.items()})
    results: list[tuple[int, int] | None] = []
    errors: list[object] = []

    def on_delivery(i: int):
        def cb(err, msg):
            if err is not None:
                errors.append(err)
            else:
                results[i] = (msg.partition(), msg.offset())

        return cb

    for i, (key, value) in enumerate(records):
        results.append(None)
        kwargs = {"key": key, "value": value, "on_delivery": on_delivery(i)}
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(topic, **kwargs)
        producer.poll(0)
    left = producer.flush(60)
    assert left == 0 and not errors, f"undelivered={left} errors={errors}"
    return [r for r in results if r is not None]


def produce_transactions(
    bootstrap: str,
    txn_id: str,
    topic: str,
    transactions: Iterable[tuple[Iterable[tuple[str | None, str]], bool]],
    *,
    partition: int = 0,
) -> None:
    """One transactional producer writes each `(records, commit)` in turn into
    `partition` as one transaction, committed or aborted (flushed first, so aborted
    records reach the log and a reader must skip them)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    for records, commit in transactions:
        producer.begin_transaction()
        for key, value in records:
            producer.produce(topic, key=key, value=value, partition=partition)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


def consume_all(
    bootstrap: str,
    topic: str,
    partitions: Iterable[int],
    expected: int,
    *,
    timeout: float = 60,
    **config: object,
) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(partition, offset, key, value) of `expected` records read from offset 0 with assign()."""
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": "unused",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 100,
        **config,
    }
    consumer = Consumer(conf)
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    out: list[tuple[int, int, bytes | None, bytes | None]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"consumer error: {msg.error()}")
            out.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def produce_values(
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


@dataclass(frozen=True)
class Record:
    """One record as `read_topic` reads it: its coordinates, bytes and headers."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes]


def read_topic(
    bootstrap: str,
    topic: str,
    *,
    isolation: str = "read_committed",
    timeout: float = 60.0,
    client_config: dict[str, str] | None = None,
) -> list[Record]:
    """Every record of every partition of `topic`, as a `read_committed` (or
    `isolation`) consumer sees it; `client_config`: more properties (security)."""
    consumer = Consumer(
        {
            **(client_config or {}),
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=timeout).topics[topic]
        out: list[Record] = []
        for p in sorted(meta.partitions):
            tp = TopicPartition(topic, p)
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            deadline = time.monotonic() + timeout
            while consumer.position([tp])[0].offset < high:
                assert time.monotonic() < deadline, f"{topic} [{p}]: did not reach {high}"
                for msg in consumer.consume(500, timeout=0.5):
                    assert msg.error() is None, msg.error()
                    out.append(
                        Record(p, msg.offset(), msg.key(), msg.value(), dict(msg.headers() or []))
                    )
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
