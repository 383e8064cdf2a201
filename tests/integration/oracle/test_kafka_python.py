"""The second client, kafka-python (its own protocol code, its own request versions): the
same kinds of scenario as the confluent-kafka ones, compared on both brokers."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from tests.integration.oracle.clients import create_topic
from tests.integration.oracle.differential import on_both, unique

pytestmark = pytest.mark.kafka

T0 = 1_700_000_000_000


def _error(e: BaseException | None) -> str | None:
    return None if e is None else type(e).__name__


def _producer(bootstrap: str, **conf: Any) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **conf)


def _consumer(bootstrap: str, group: str | None = None, **conf: Any) -> KafkaConsumer:
    base = {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": 50,
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 300,
    }
    return KafkaConsumer(**{**base, **conf})


def _read(bootstrap: str, topic: str, partitions: int, expected: int) -> list[tuple[Any, ...]]:
    c = _consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        out: list[tuple[Any, ...]] = []
        deadline = time.monotonic() + 20
        while len(out) < expected and time.monotonic() < deadline:
            for batch in c.poll(timeout_ms=200).values():
                out += [
                    (
                        m.partition,
                        m.offset,
                        m.key,
                        m.value,
                        m.timestamp_type,
                        m.timestamp,
                        list(m.headers),
                    )
                    for m in batch
                ]
        return sorted(out, key=lambda r: (r[0], r[1]))
    finally:
        c.close()


def records_roundtrip(bootstrap: str) -> dict[str, Any]:
    topic = unique("kp-records")
    create_topic(bootstrap, topic, 2)
    p = _producer(bootstrap)
    sends = [
        {
            "partition": 0,
            "key": b"k",
            "value": b"v",
            "timestamp_ms": T0,
            "headers": [("h", b"1"), ("h", b"2")],
        },
        {"partition": 0, "key": None, "value": b"no key", "timestamp_ms": T0 + 1},
        {"partition": 1, "key": b"tomb", "value": None, "timestamp_ms": T0 - 5},
        {"partition": 1, "key": b"", "value": b"y" * 70_000, "timestamp_ms": T0 + 2},
    ]
    futures = [p.send(topic, **kw) for kw in sends]
    p.flush(30)
    meta = [(f.get(30).partition, f.get(30).offset, f.get(30).timestamp) for f in futures]
    p.close()
    return {"metadata": meta, "records": _read(bootstrap, topic, 2, len(sends))}


def test_records_round_trip(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, records_roundtrip)
    assert len(on_kafka["records"]) == 4
    assert on_bundled == on_kafka


def _shared_assignment(
    bootstrap: str, topic: str, group: str, *, partitions: int
) -> dict[str, Any]:
    """Two members subscribe to `topic`, each polled by its own thread (kafka-python joins
    a group inside poll(), so one thread polling both can starve a rebalance), until
    together they hold every partition once."""
    members = [_consumer(bootstrap, group) for _ in range(2)]
    # Each member subscribes, then learns the topic's partitions, before it joins.
    # kafka-python 3.0.12 snapshots a subscription's partitions only from a metadata
    # update that arrives while subscribed; a leader whose snapshot is still empty
    # assigns, sees the partitions arrive, and rejoins: one more rebalance, during
    # which its LeaveGroup at close waits behind its pending JoinGroup for the 30 s
    # request timeout, on either broker.
    for m in members:
        m.subscribe([topic])
        assert m.partitions_for_topic(topic) == set(range(partitions))
    done = threading.Event()

    def run(m: KafkaConsumer) -> None:
        while not done.is_set():
            m.poll(timeout_ms=100)

    threads = [threading.Thread(target=run, args=(m,), daemon=True) for m in members]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            sets = [{tp.partition for tp in m.assignment()} for m in members]
            if (
                all(sets)
                and sum(map(len, sets)) == partitions
                and len(set().union(*sets)) == partitions
            ):
                break
            time.sleep(0.1)
    finally:
        done.set()
        for t in threads:
            t.join(10)
        for m in members:
            m.close()
    return {"sizes": sorted(map(len, sets)), "union": sorted(set().union(*sets))}


def commits_and_groups(bootstrap: str) -> dict[str, Any]:
    """Offsets committed with metadata and read back; two members of a group sharing three
    partitions (every partition once); the admin's view of the group's offsets."""
    topic, group = unique("kp-group"), unique("group")
    create_topic(bootstrap, topic, 3)
    c = _consumer(bootstrap, group)
    tps = [TopicPartition(topic, p) for p in range(3)]
    c.commit({tps[0]: OffsetAndMetadata(5, "meta", -1), tps[1]: OffsetAndMetadata(0, "", -1)})
    committed = [(c.committed(tp), c.committed(tp, metadata=True).metadata) for tp in tps[:2]]
    committed.append((c.committed(tps[2]), None))
    c.close()
    assignment = _shared_assignment(bootstrap, topic, group, partitions=3)
    a = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = a.list_group_offsets({group: None})[group]
    finally:
        a.close()
    listed = sorted((tp.partition, om.offset, om.metadata) for tp, om in offsets.items())
    return {"committed": committed, "assignment": assignment, "listed": listed}


def test_commits_and_groups(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, commits_and_groups)
    assert on_kafka["committed"][0] == (5, "meta") and on_kafka["assignment"]["union"] == [0, 1, 2]
    assert on_bundled == on_kafka


def bad_requests(bootstrap: str) -> dict[str, Any]:
    """The exceptions kafka-python raises for an invalid topic name, an existing topic, a
    record over max.message.bytes and a fetch past the end with no reset policy."""
    topic = unique("kp-errors")
    create_topic(bootstrap, topic, 1, {"max.message.bytes": "2048"})
    seen: dict[str, Any] = {}
    a = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        for label, name in (("invalid_name", "bad name"), ("exists", topic)):
            try:
                a.create_topics([NewTopic(name, 1, 1)])
            except KafkaError as e:
                seen[label] = _error(e)
            else:
                seen[label] = None
    finally:
        a.close()
    seen["produce"] = []
    for size in (10, 5000):
        # one producer per record: the refused batch holds only the large record
        p = _producer(bootstrap, retries=0)
        try:
            meta = p.send(topic, value=b"x" * size, partition=0, timestamp_ms=1).get(30)
        except KafkaError as e:
            seen["produce"].append((_error(e), None))
        else:
            seen["produce"].append((None, meta.offset))
        finally:
            p.close(5)
    c = _consumer(bootstrap, auto_offset_reset="none")
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 10)
        deadline = time.monotonic() + 15
        seen["fetch_past_end"] = None
        while time.monotonic() < deadline and seen["fetch_past_end"] is None:
            try:
                c.poll(timeout_ms=200)
            except KafkaError as e:
                seen["fetch_past_end"] = _error(e)
    finally:
        c.close()
    return seen


def test_bad_requests(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, bad_requests)
    assert on_kafka["exists"] == "TopicAlreadyExistsError" and on_kafka["fetch_past_end"]
    assert on_bundled == on_kafka
