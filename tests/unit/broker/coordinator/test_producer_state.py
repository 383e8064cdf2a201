"""Sequence checks and open-transaction tracking on genuine RecordBatch v2 bytes."""

from __future__ import annotations

import datetime

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from streams.broker.coordinator.partition_producers import (
    Duplicate,
    PartitionProducers,
    Rejected,
    iter_batch_info,
)
from streams.broker.coordinator.producer_state import ProducerStateManager
from tests.support.broker_wire import producer_batch

_TS = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def batch(pid: int, epoch: int, seq: int, n: int = 1, *, transactional: bool = False) -> bytes:
    values = [b"v%d" % i for i in range(n)]
    return producer_batch(pid, epoch, seq, values, transactional=transactional, timestamp=_TS)


class Log:
    """Offsets a partition would assign, for driving the manager like the server does."""

    def __init__(self, manager: ProducerStateManager, topic: str = "t") -> None:
        self.manager, self.topic, self.next = manager, topic, 0

    def produce(self, data: bytes) -> Duplicate | Rejected | int:
        verdict = self.manager.check(self.topic, 0, memoryview(data))
        if verdict is not None:
            return verdict
        base = self.next
        n = sum(b.last_offset_delta + 1 for b in iter_batch_info(data))
        self.next += n
        self.manager.on_appended(self.topic, 0, memoryview(data), base)
        return base


def test_header_fields_read_from_kio_written_batch():
    (info,) = list(iter_batch_info(batch(7, 3, 11, 4, transactional=True)))
    assert (info.producer_id, info.producer_epoch, info.base_sequence) == (7, 3, 11)
    assert info.last_offset_delta == 3 and info.last_sequence == 14 and info.record_count == 4
    assert info.is_transactional and not info.is_control


def test_in_order_batches_append_and_a_retry_is_acked_with_its_first_offset():
    log = Log(ProducerStateManager(None))
    assert log.produce(batch(1, 0, 0, 3)) == 0
    assert log.produce(batch(1, 0, 3, 2)) == 3
    assert log.produce(batch(1, 0, 0, 3)) == Duplicate(0)
    assert log.produce(batch(1, 0, 3, 2)) == Duplicate(3)
    assert log.next == 5


def test_gap_in_sequence_is_out_of_order():
    log = Log(ProducerStateManager(None))
    log.produce(batch(1, 0, 0, 2))
    verdict = log.produce(batch(1, 0, 5))
    assert isinstance(verdict, Rejected) and verdict.error is ErrorCode.out_of_order_sequence_number
    assert "expected sequence 2" in verdict.message


def test_older_epoch_is_fenced_and_new_epoch_restarts_at_zero():
    log = Log(ProducerStateManager(None))
    log.produce(batch(1, 1, 0, 2))
    old = log.produce(batch(1, 0, 2))
    assert isinstance(old, Rejected) and old.error is ErrorCode.invalid_producer_epoch
    bad = log.produce(batch(1, 2, 9))
    assert isinstance(bad, Rejected) and bad.error is ErrorCode.out_of_order_sequence_number
    assert log.produce(batch(1, 2, 0)) == 2


def test_only_last_five_batches_are_remembered_for_duplicates():
    log = Log(ProducerStateManager(None))
    for seq in range(7):
        log.produce(batch(1, 0, seq))
    assert log.produce(batch(1, 0, 2)) == Duplicate(2)
    old = log.produce(batch(1, 0, 0))
    assert isinstance(old, Rejected)  # out of the window: not silently re-appended


def test_non_idempotent_batches_are_never_checked():
    log = Log(ProducerStateManager(None))
    assert log.produce(batch(-1, -1, -1)) == 0
    assert log.produce(batch(-1, -1, -1)) == 1


def test_open_transaction_holds_the_last_stable_offset_until_its_marker():
    manager = ProducerStateManager(None)
    log = Log(manager)
    log.produce(batch(1, 0, 0, 2))  # plain idempotent: offsets 0-1
    log.produce(batch(2, 0, 0, 3, transactional=True))  # txn from offset 2
    log.produce(batch(3, 0, 0, 1, transactional=True))  # another txn from offset 5
    assert manager.first_unstable_offset("t", 0) == 2
    assert manager.partition("t", 0).end_transaction(2, 0) == (2, 4)
    assert manager.first_unstable_offset("t", 0) == 5
    assert manager.partition("t", 0).end_transaction(3, 0) == (5, 5)
    assert manager.first_unstable_offset("t", 0) is None
    assert manager.partition("t", 0).end_transaction(3, 0) is None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(1, 4)), min_size=1, max_size=30), st.data()
)
def test_retries_never_append_twice(sends, data):
    """Any interleaving of producers with random retries of recent batches appends each batch once."""
    log = Log(ProducerStateManager(None))
    next_seq = {0: 0, 1: 0, 2: 0}
    sent: dict[int, list[tuple[bytes, int]]] = {0: [], 1: [], 2: []}
    for pid, n in sends:
        b = batch(pid, 0, next_seq[pid], n)
        offset = log.produce(b)
        assert isinstance(offset, int)
        sent[pid].append((b, offset))
        next_seq[pid] += n
        if data.draw(st.booleans()):
            recent = sent[pid][-5:]
            old_bytes, old_offset = recent[data.draw(st.integers(0, len(recent) - 1))]
            assert log.produce(old_bytes) == Duplicate(old_offset)
    assert log.next == sum(n for _, n in sends)


def test_partition_producers_accept_unknown_producer_at_any_sequence():
    state = PartitionProducers()
    (info,) = list(iter_batch_info(batch(9, 0, 42)))
    assert state.check(info) is None  # KIP-360: state may have expired with retention


def test_idle_producers_expire_but_not_while_their_transaction_is_open():
    manager = ProducerStateManager(None)
    log = Log(manager)
    log.produce(batch(1, 0, 0, 2))  # kio writes the batch with _TS as its timestamps
    log.produce(batch(2, 0, 0, 1, transactional=True))
    ts = int(_TS.timestamp() * 1000)
    assert manager.expire(ts + 1000, 1000) == 0  # idle exactly max_idle: kept
    assert manager.expire(ts + 1001, 1000) == 1  # producer 1 forgotten, the open txn kept
    assert set(manager.partition("t", 0).entries) == {2}
    assert log.produce(batch(1, 0, 7)) == 3  # an expired producer is new again: any sequence
    manager.partition("t", 0).end_transaction(2, 0, now_ms=ts + 5000)
    assert manager.expire(ts + 5500, 1000) == 1  # producer 1 again; 2 was active at ts + 5000
    assert set(manager.partition("t", 0).entries) == {2}
    assert manager.expire(ts + 6001, 1000) == 1
