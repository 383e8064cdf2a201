"""Transactions as confluent-kafka sees them on both brokers: what read_committed and
read_uncommitted readers get, where the control markers sit, the last stable offset
under an open transaction, offsets committed inside a transaction, and fencing."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition

from tests.integration.oracle.clients import (
    QUIET,
    consumer,
    create_topic,
    error_name,
    read_to_end,
)
from tests.integration.oracle.differential import on_both, unique
from tests.support.broker_wire import (
    Wire,
    add_partitions_to_txn,
    end_txn,
    init_transactional_producer,
    producer_batch,
    transactional_produce,
)

pytestmark = pytest.mark.kafka


def _txn_producer(bootstrap: str, txn_id: str) -> Producer:
    p = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **QUIET}
    )
    p.init_transactions(30)
    return p


def _settled(bootstrap: str, topic: str) -> None:
    """Wait until partition 0 has no transaction left open: its last stable offset (the
    end a read_committed reader sees) is its high watermark. A broker answers EndTxn
    once the outcome is decided and writes the partitions' markers after that (Kafka
    does so asynchronously), so a reader started right after a commit may still stop
    before the transaction's records."""
    committed = consumer(bootstrap, **{"isolation.level": "read_committed"})
    uncommitted = consumer(bootstrap, **{"isolation.level": "read_uncommitted"})
    tp = TopicPartition(topic, 0)
    try:
        deadline = time.monotonic() + 30
        while True:
            stable = committed.get_watermark_offsets(tp, timeout=10, cached=False)[1]
            high = uncommitted.get_watermark_offsets(tp, timeout=10, cached=False)[1]
            if stable == high:
                return
            assert time.monotonic() < deadline, f"{topic}: stable offset {stable} < {high}"
            time.sleep(0.05)
    finally:
        committed.close()
        uncommitted.close()


def _transaction(
    p: Producer, bootstrap: str, topic: str, values: list[bytes], *, commit: bool | None
) -> None:
    """One transaction of `values` into partition 0, committed, aborted or (None) left
    open; a finished one with its markers written."""
    p.begin_transaction()
    for v in values:
        p.produce(topic, value=v, partition=0)
    p.flush(30)
    if commit is None:
        return
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)
    _settled(bootstrap, topic)


def _values(read: dict[str, Any]) -> dict[str, Any]:
    return {"ends": read["ends"], "records": [(r[1], r[3]) for r in read["records"]]}


def isolation_levels(bootstrap: str) -> dict[str, Any]:
    topic = unique("txn")
    create_topic(bootstrap, topic, 1)
    p = _txn_producer(bootstrap, unique("txn-id"))
    _transaction(p, bootstrap, topic, [b"a", b"b"], commit=True)
    _transaction(p, bootstrap, topic, [b"c"], commit=False)
    _transaction(p, bootstrap, topic, [b"d"], commit=True)
    _transaction(p, bootstrap, topic, [b"e", b"f"], commit=None)
    seen: dict[str, Any] = {}
    for isolation in ("read_committed", "read_uncommitted"):
        seen[f"open/{isolation}"] = _values(read_to_end(bootstrap, topic, 1, isolation=isolation))
    p.commit_transaction(30)
    _settled(bootstrap, topic)
    for isolation in ("read_committed", "read_uncommitted"):
        seen[f"closed/{isolation}"] = _values(read_to_end(bootstrap, topic, 1, isolation=isolation))
    return seen


def test_isolation_levels(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, isolation_levels)
    assert [v for _, v in on_kafka["closed/read_committed"]["records"]] == [
        b"a",
        b"b",
        b"d",
        b"e",
        b"f",
    ]
    assert on_bundled == on_kafka


def offsets_in_transactions(bootstrap: str) -> list[Any]:
    """send_offsets_to_transaction: the group's offsets appear only when the transaction commits."""
    topic, group = unique("txn-offsets"), unique("group")
    create_topic(bootstrap, topic, 1)
    c = consumer(bootstrap, group)
    p = _txn_producer(bootstrap, unique("txn-id"))
    seen = []
    try:
        c.assign([TopicPartition(topic, 0)])
        for offset, commit in ((5, False), (7, True)):
            p.begin_transaction()
            p.produce(topic, value=b"v%d" % offset, partition=0)
            p.send_offsets_to_transaction(
                [TopicPartition(topic, 0, offset)], c.consumer_group_metadata(), 30
            )
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
            tp = c.committed([TopicPartition(topic, 0)], timeout=10)[0]
            seen.append((commit, tp.offset, tp.error))
    finally:
        c.close()
    return seen


def test_offsets_in_transactions(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, offsets_in_transactions)
    assert on_kafka == [(False, -1001, None), (True, 7, None)]
    assert on_bundled == on_kafka


def _failure(call: Any) -> tuple[Any, ...] | None:
    try:
        call()
    except KafkaException as e:
        err = e.args[0]
        return (error_name(err), err.fatal(), err.retriable(), err.txn_requires_abort())
    return None


def fenced_producer(bootstrap: str) -> dict[str, Any]:
    """A second producer with the same transactional.id fences the first, whose open
    transaction is aborted; the first's next commit fails."""
    topic, txn_id = unique("fenced"), unique("txn-id")
    create_topic(bootstrap, topic, 1)
    first = _txn_producer(bootstrap, txn_id)
    _transaction(first, bootstrap, topic, [b"from first"], commit=None)
    second = _txn_producer(bootstrap, txn_id)
    failed = _failure(lambda: first.commit_transaction(30))
    _transaction(second, bootstrap, topic, [b"from second"], commit=True)
    return {
        "first_commit": failed,
        "read_committed": _values(read_to_end(bootstrap, topic, 1, isolation="read_committed")),
        "read_uncommitted": _values(read_to_end(bootstrap, topic, 1, isolation="read_uncommitted")),
    }


def test_fenced_producer(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, fenced_producer)
    assert on_kafka["first_commit"] is not None
    assert on_bundled == on_kafka


def _stable_and_high(bootstrap: str, topic: str) -> tuple[int, int]:
    """(last stable offset, high watermark) of partition 0."""
    tp = TopicPartition(topic, 0)
    committed = consumer(bootstrap, **{"isolation.level": "read_committed"})
    uncommitted = consumer(bootstrap, **{"isolation.level": "read_uncommitted"})
    try:
        stable = committed.get_watermark_offsets(tp, timeout=10, cached=False)[1]
        high = uncommitted.get_watermark_offsets(tp, timeout=10, cached=False)[1]
        return stable, high
    finally:
        committed.close()
        uncommitted.close()


def transactional_batches_outside_a_transaction(bootstrap: str) -> dict[str, Any]:
    """Transactional record batches a client library would never send, on the wire: no
    transactional id, one nobody initialised, a producer id or epoch that is not the
    transactional id's, a partition not added to the transaction. Each is refused and
    leaves the partition's last stable offset alone; the partition once added is written."""
    topic, txn_id = unique("verify"), unique("txn-id")
    create_topic(bootstrap, topic, 1)
    codes: dict[str, Any] = {}

    def produce(name: str, pid: int, epoch: int, tid: str | None) -> Any:
        """The answer a producer ends with: retriable ones (Kafka's coordinator still
        loading a partition of its topic) are retried for up to 10 s."""
        batch = producer_batch(pid, epoch, 0, [name.encode()], transactional=True)
        deadline = time.monotonic() + 10
        while True:
            answer = transactional_produce(wire, topic, 0, batch, transactional_id=tid)
            if not answer.error_code.retriable or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        codes[name] = answer.error_code.name
        return answer

    with Wire(bootstrap) as wire:
        # first: Kafka creates its transaction coordinator's topic on first use, and
        # cannot verify anything before (NOT_LEADER_OR_FOLLOWER)
        pid, epoch = init_transactional_producer(wire, txn_id)
        produce("no transactional id", 4_242_424, 0, None)
        produce("unknown transactional id", 4_242_424, 0, unique("nobody"))
        produce("another producer id", pid + 1, epoch, txn_id)
        produce("newer epoch", pid, epoch + 1, txn_id)
        produce("partition not added", pid, epoch, txn_id)
        codes["refused: stable, high"] = _stable_and_high(bootstrap, topic)
        codes["add partition"] = add_partitions_to_txn(wire, txn_id, pid, epoch, topic, 0).name
        added = produce("partition added", pid, epoch, txn_id)
        codes["added at"] = added.base_offset
        codes["open: stable, high"] = _stable_and_high(bootstrap, topic)
        codes["abort"] = end_txn(wire, txn_id, pid, epoch, commit=False).name
    _settled(bootstrap, topic)
    codes["aborted: stable, high"] = _stable_and_high(bootstrap, topic)
    return codes


def test_transactional_batches_outside_a_transaction(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, transactional_batches_outside_a_transaction)
    assert on_kafka["no transactional id"] == "transactional_id_authorization_failed"
    assert on_kafka["partition not added"] == "invalid_txn_state"
    assert on_kafka["unknown transactional id"] == "invalid_producer_id_mapping"
    assert on_kafka["refused: stable, high"] == (0, 0)
    assert on_kafka["aborted: stable, high"] == (2, 2)
    assert on_bundled == on_kafka
