"""A transactional batch is written only inside the transaction that added its partition,
and a transaction nobody will end can be ended with Kafka's own `kafka-transactions`.

Without the check any client could send one transactional batch under a producer id
nobody owns and hold back every read_committed reader of the partition for good, across
restarts. A data directory written before the check can hold such a hanging transaction;
`kafka-transactions find-hanging` finds it and `kafka-transactions abort` ends it, as on
Kafka (KIP-664). Real broker processes, raw requests for what a client library would never
send, confluent-kafka readers, Apache Kafka's tool from its cached jars.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from kio.schema.errors import ErrorCode

from tests.support.broker_clients import create_topic, read_all
from tests.support.broker_wire import (
    Wire,
    producer_batch,
    record_batch,
    transactional_produce,
)
from tests.support.kafka_tools import run

pytestmark = pytest.mark.kafka

STRANGER = 7_777_777  # a producer id no InitProducerId handed out
# an open transaction counts as hanging once older than this many minutes (default 15)
FIND_HANGING = ["find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0"]


def _stable_and_high(bootstrap: str, topic: str) -> tuple[int, int]:
    """(last stable offset, high watermark) of partition 0, as librdkafka reads them."""
    from confluent_kafka import Consumer

    ends = []
    for isolation in ("read_committed", "read_uncommitted"):
        c = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "ends", "isolation.level": isolation}
        )
        try:
            ends.append(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
        finally:
            c.close()
    return ends[0], ends[1]


def test_a_stranger_cannot_pin_the_last_stable_offset(broker_factory, unique, tmp_path) -> None:
    data_dir = tmp_path / "b"
    broker = broker_factory(data_dir)
    topic = unique("pinned")
    create_topic(broker.bootstrap, topic)
    batch = producer_batch(STRANGER, 0, 0, [b"never ended"], transactional=True)
    with Wire(broker.bootstrap) as wire:
        answer = transactional_produce(wire, topic, 0, batch, transactional_id=unique("tid"))
        assert answer.error_code == ErrorCode.invalid_producer_id_mapping
        plain = transactional_produce(wire, topic, 0, record_batch([b"v"]), transactional_id=None)
        assert plain.error_code == ErrorCode.none
    assert _stable_and_high(broker.bootstrap, topic) == (1, 1)
    broker.stop()
    again = broker_factory(data_dir)
    assert _stable_and_high(again.bootstrap, topic) == (1, 1)
    assert [v for _, _, v in read_all(again.bootstrap, topic, 1)] == [b"v"]


def _hanging_transaction(data_dir: Path, topic: str) -> None:
    """Append, with the broker stopped, what a broker without the check accepted: a
    transactional batch of a producer id its coordinator never handed out, then a plain
    record, through the broker's own storage."""
    from streams.broker.storage import LogManager

    logs = LogManager(data_dir).load()
    try:
        log = logs.get_log(topic, 0)
        log.append(producer_batch(STRANGER, 0, 0, [b"hanging"], transactional=True))
        log.append(record_batch([b"after"]))
        logs.flush_dirty()
    finally:
        logs.close()


def _table(text: str) -> list[dict[str, str]]:
    lines = [line.split("\t") for line in text.splitlines() if line.strip()]
    header, *rows = [[cell.strip() for cell in line] for line in lines]
    return [dict(zip(header, row, strict=False)) for row in rows]


def test_kafka_transactions_finds_and_aborts_a_hanging_transaction(
    broker_factory, unique, tmp_path
) -> None:
    data_dir = tmp_path / "b"
    topic = unique("hanging")
    first = broker_factory(data_dir)
    create_topic(first.bootstrap, topic)
    first.stop()
    _hanging_transaction(data_dir, topic)

    broker = broker_factory(data_dir)
    bootstrap = broker.bootstrap
    assert _stable_and_high(bootstrap, topic) == (0, 2)  # read_committed readers held back

    described = run(
        "kafka-transactions",
        ["describe-producers", "--topic", topic, "--partition", "0"],
        bootstrap,
    )
    assert described.code == 0, described.explain()
    [producer] = _table(described.stdout)
    assert producer["ProducerId"] == str(STRANGER)
    assert producer["CurrentTransactionStartOffset"] == "0"
    assert producer["LastSequence"] == "0"

    hanging = run("kafka-transactions", FIND_HANGING, bootstrap)
    assert hanging.code == 0, hanging.explain()
    [row] = _table(hanging.stdout)
    assert (row["Topic"], row["Partition"], row["ProducerId"], row["StartOffset"]) == (
        topic,
        "0",
        str(STRANGER),
        "0",
    )

    aborted = run(
        "kafka-transactions",
        ["abort", "--topic", topic, "--partition", "0", "--start-offset", "0"],
        bootstrap,
    )
    assert aborted.code == 0, aborted.explain()
    assert _stable_and_high(bootstrap, topic) == (3, 3)  # the abort marker at offset 2
    assert [v for _, _, v in read_all(bootstrap, topic, 1)] == [b"after"]
    uncommitted = read_all(bootstrap, topic, 1, isolation="read_uncommitted")
    assert [v for _, _, v in uncommitted] == [b"hanging", b"after"]
    again = run("kafka-transactions", FIND_HANGING, bootstrap)
    assert again.code == 0 and _table(again.stdout) == [], again.explain()

    broker.stop()
    restarted = broker_factory(data_dir)
    assert _stable_and_high(restarted.bootstrap, topic) == (3, 3)
    assert [v for _, _, v in read_all(restarted.bootstrap, topic, 1)] == [b"after"]
