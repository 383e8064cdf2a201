"""Transactions with librdkafka: commit/abort visibility, LSO, offsets in transactions, restart."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.support.broker_clients import (
    FAST_GROUP,
    committed,
    create_topic,
    end_offsets,
    produce_values,
    read_all,
)

pytestmark = pytest.mark.kafka


def txn_producer(bootstrap: str, txn_id: str, **conf: object) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **conf}
    )
    producer.init_transactions(30)
    return producer


def test_committed_and_aborted_transactions_as_seen_by_both_isolation_levels(broker, unique):
    topic = unique("txn")
    create_topic(broker.bootstrap, topic, 2)
    producer = txn_producer(broker.bootstrap, unique("tid"))
    for label, commit in (("a", True), ("b", False), ("c", True)):
        producer.begin_transaction()
        for i in range(6):
            producer.produce(topic, value=f"{label}{i}".encode(), partition=i % 2)
        producer.flush(30)  # abort would otherwise drop unsent records client-side
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    committed_values = sorted(v for _, _, v in read_all(broker.bootstrap, topic, 2))
    assert committed_values == sorted(f"{x}{i}".encode() for x in "ac" for i in range(6))
    all_values = sorted(
        v for _, _, v in read_all(broker.bootstrap, topic, 2, isolation="read_uncommitted")
    )
    assert all_values == sorted(f"{x}{i}".encode() for x in "abc" for i in range(6))
    # 3 data records + 1 marker per transaction and partition
    assert end_offsets(broker.bootstrap, topic, 2) == {0: 12, 1: 12}


def test_open_transaction_holds_back_read_committed_consumers_until_commit(broker, unique):
    topic = unique("lso")
    create_topic(broker.bootstrap, topic, 1)
    produce_values(broker.bootstrap, topic, [(0, b"before")])
    producer = txn_producer(broker.bootstrap, unique("tid"))
    producer.begin_transaction()
    producer.produce(topic, value=b"pending", partition=0)
    producer.flush(30)  # appended, not committed

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("g"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        seen = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error():
                seen.append(msg.value())
        assert seen == [b"before"]  # the open transaction's record stays invisible
        uncommitted = [
            v for _, _, v in read_all(broker.bootstrap, topic, 1, isolation="read_uncommitted")
        ]
        assert uncommitted == [b"before", b"pending"]

        producer.commit_transaction(30)
        deadline = time.monotonic() + 15
        while len(seen) < 2 and time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error():
                seen.append(msg.value())
        assert seen == [b"before", b"pending"]
    finally:
        consumer.close()


def test_consume_transform_produce_commits_offsets_with_the_output(broker, unique):
    src, dst, group = unique("src"), unique("dst"), unique("g")
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, dst, 1)
    produce_values(broker.bootstrap, src, [(i % 2, b"%d" % i) for i in range(10)])

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **FAST_GROUP})
    consumer.subscribe([src])
    producer = txn_producer(broker.bootstrap, unique("tid"))
    try:
        records = []
        deadline = time.monotonic() + 30
        while len(records) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                records.append(msg)
        assert len(records) == 10

        # an aborted attempt: neither output nor offsets become visible
        producer.begin_transaction()
        for msg in records:
            producer.produce(dst, value=b"aborted-" + msg.value(), partition=0)
        producer.flush(30)
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
        )
        producer.abort_transaction(30)
        assert set(committed(broker.bootstrap, group, src, 2).values()) == {
            -1001
        }  # nothing committed

        producer.begin_transaction()
        for msg in records:
            producer.produce(dst, value=b"x" + msg.value(), partition=0)
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
        )
        producer.commit_transaction(30)
    finally:
        consumer.close()
    out = sorted(v for _, _, v in read_all(broker.bootstrap, dst, 1))
    assert out == sorted(b"x%d" % i for i in range(10))
    assert committed(broker.bootstrap, group, src, 2) == {0: 5, 1: 5}


def test_a_restart_aborts_the_transaction_that_was_in_flight(broker_factory, unique, tmp_path):
    topic, txn_id = unique("inflight"), unique("tid")
    data_dir = tmp_path / "b"
    first = broker_factory(data_dir)
    create_topic(first.bootstrap, topic, 1)
    producer = txn_producer(first.bootstrap, txn_id)
    producer.begin_transaction()
    producer.produce(topic, value=b"committed", partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"in-flight", partition=0)
    producer.flush(30)
    first.stop()  # the broker goes away with the transaction open
    del producer

    second = broker_factory(data_dir)
    # offsets: committed 0, marker 1, in-flight 2, abort marker 3
    assert end_offsets(second.bootstrap, topic, 1) == {0: 4}
    assert [v for _, _, v in read_all(second.bootstrap, topic, 1)] == [b"committed"]
    # the same transactional id starts again with a bumped epoch and works
    again = txn_producer(second.bootstrap, txn_id)
    again.begin_transaction()
    again.produce(topic, value=b"after", partition=0)
    again.commit_transaction(30)
    assert [v for _, _, v in read_all(second.bootstrap, topic, 1)] == [b"committed", b"after"]


def test_a_new_producer_instance_fences_the_old_one(broker, unique):
    topic, txn_id = unique("zombie"), unique("tid")
    create_topic(broker.bootstrap, topic, 1)
    old = txn_producer(broker.bootstrap, txn_id)
    old.begin_transaction()
    old.produce(topic, value=b"zombie", partition=0)
    old.flush(30)
    new = txn_producer(broker.bootstrap, txn_id)  # aborts the old instance's transaction
    new.begin_transaction()
    new.produce(topic, value=b"fresh", partition=0)
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as info:
        old.commit_transaction(10)
    assert info.value.args[0].fatal() or "fenced" in str(info.value).lower()
    assert [v for _, _, v in read_all(broker.bootstrap, topic, 1)] == [b"fresh"]


def test_a_transaction_open_past_its_timeout_is_aborted(broker_factory, unique):
    b = broker_factory(**{"coordinator.tick.ms": 50})
    topic = unique("timeout")
    create_topic(b.bootstrap, topic, 1)
    producer = txn_producer(b.bootstrap, unique("tid"), **{"transaction.timeout.ms": 1000})
    producer.begin_transaction()
    producer.produce(topic, value=b"stale", partition=0)
    producer.flush(30)
    deadline = time.monotonic() + 20
    while end_offsets(b.bootstrap, topic, 1)[0] < 2 and time.monotonic() < deadline:
        time.sleep(0.2)  # the coordinator writes an abort marker after the timeout
    assert end_offsets(b.bootstrap, topic, 1) == {0: 2}
    assert read_all(b.bootstrap, topic, 1) == []
    with pytest.raises(KafkaException):
        producer.commit_transaction(10)


def test_kafka_python_transactions_commit_and_abort(broker, unique):
    from kafka import KafkaProducer

    topic = unique("kptxn")
    create_topic(broker.bootstrap, topic, 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=unique("tid"))
    producer.init_transactions()
    for label, commit in (("keep", True), ("drop", False)):
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, value=f"{label}{i}".encode(), partition=0)
        producer.flush(30)
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.close()
    assert [v for _, _, v in read_all(broker.bootstrap, topic, 1)] == [b"keep0", b"keep1", b"keep2"]
    assert len(read_all(broker.bootstrap, topic, 1, isolation="read_uncommitted")) == 6
