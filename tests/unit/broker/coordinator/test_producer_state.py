"""Sequence checks and open-transaction tracking on genuine RecordBatch v2 bytes, against
a real partition log (which keeps the state; the coordinator checks produces with it)."""

from __future__ import annotations

import datetime
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from streams.broker.coordinator.producer_state import ProducerStateManager
from streams.broker.storage import LogManager
from streams.broker.storage.producer_state import (
    Duplicate,
    PartitionProducers,
    Rejected,
    iter_headers,
    last_sequence,
)
from tests.support.broker_wire import producer_batch

_TS = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def batch(pid: int, epoch: int, seq: int, n: int = 1, *, transactional: bool = False) -> bytes:
    values = [b"v%d" % i for i in range(n)]
    return producer_batch(pid, epoch, seq, values, transactional=transactional, timestamp=_TS)


class Log:
    """A real partition log in a temporary directory, driven like the server does:
    the coordinator's check, then the append (which updates the producer state)."""

    def __init__(self, topic: str = "t") -> None:
        self._dir = tempfile.TemporaryDirectory()
        self.logs = LogManager(self._dir.name).load()
        self.logs.create_topic(topic, 1, {})
        self.manager = ProducerStateManager(self.logs)
        self.topic = topic

    @property
    def log(self):
        return self.logs.get_log(self.topic, 0)

    @property
    def next(self) -> int:
        return self.log.log_end_offset

    def produce(self, data: bytes) -> Duplicate | Rejected | int:
        verdict = self.manager.check(self.topic, 0, memoryview(data))
        if verdict is not None:
            return verdict
        return self.log.append(data).base_offset

    def __del__(self) -> None:
        self.logs.close()
        self._dir.cleanup()


def test_header_fields_read_from_kio_written_batch():
    (info,) = list(iter_headers(batch(7, 3, 11, 4, transactional=True)))
    assert (info.producer_id, info.producer_epoch, info.base_sequence) == (7, 3, 11)
    assert info.last_offset_delta == 3 and last_sequence(info) == 14 and info.records_count == 4
    assert info.is_transactional and not info.is_control


def test_in_order_batches_append_and_a_retry_is_acked_with_its_first_offset():
    log = Log()
    assert log.produce(batch(1, 0, 0, 3)) == 0
    assert log.produce(batch(1, 0, 3, 2)) == 3
    assert log.produce(batch(1, 0, 0, 3)) == Duplicate(0)
    assert log.produce(batch(1, 0, 3, 2)) == Duplicate(3)
    assert log.next == 5


def test_gap_in_sequence_is_out_of_order():
    log = Log()
    log.produce(batch(1, 0, 0, 2))
    verdict = log.produce(batch(1, 0, 5))
    assert isinstance(verdict, Rejected) and verdict.error is ErrorCode.out_of_order_sequence_number
    assert "expected sequence 2" in verdict.message


def test_older_epoch_is_fenced_and_new_epoch_restarts_at_zero():
    log = Log()
    log.produce(batch(1, 1, 0, 2))
    old = log.produce(batch(1, 0, 2))
    assert isinstance(old, Rejected) and old.error is ErrorCode.invalid_producer_epoch
    bad = log.produce(batch(1, 2, 9))
    assert isinstance(bad, Rejected) and bad.error is ErrorCode.out_of_order_sequence_number
    assert log.produce(batch(1, 2, 0)) == 2


def test_only_last_five_batches_are_remembered_for_duplicates():
    log = Log()
    for seq in range(7):
        log.produce(batch(1, 0, seq))
    assert log.produce(batch(1, 0, 2)) == Duplicate(2)
    old = log.produce(batch(1, 0, 0))
    assert isinstance(old, Rejected)  # out of the window: not silently re-appended


def test_non_idempotent_batches_are_never_checked():
    log = Log()
    assert log.produce(batch(-1, -1, -1)) == 0
    assert log.produce(batch(-1, -1, -1)) == 1


def test_open_transaction_holds_the_last_stable_offset_until_its_marker():
    log = Log()
    manager = log.manager
    log.produce(batch(1, 0, 0, 2))  # plain idempotent: offsets 0-1
    log.produce(batch(2, 0, 0, 3, transactional=True))  # txn from offset 2
    log.produce(batch(3, 0, 0, 1, transactional=True))  # another txn from offset 5
    assert manager.first_unstable_offset("t", 0) == 2
    assert log.log.append_control(2, 0, False, 1) == 6  # abort: indexed with its span
    assert log.log.aborted_transactions(0, 7) == [(2, 2)]
    assert manager.first_unstable_offset("t", 0) == 5
    log.log.append_control(3, 0, True, 1)
    assert manager.first_unstable_offset("t", 0) is None
    log.log.append_control(3, 0, False, 1)  # a marker of no open transaction indexes nothing
    assert log.log.aborted_transactions(0, 100) == [(2, 2)]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(1, 4)), min_size=1, max_size=30), st.data()
)
def test_retries_never_append_twice(sends, data):
    """Any interleaving of producers with random retries of recent batches appends each batch once."""
    log = Log()
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
    (info,) = list(iter_headers(batch(9, 0, 42)))
    assert state.check(info) is None  # KIP-360: state may have expired with retention


def test_idle_producers_expire_but_not_while_their_transaction_is_open():
    log = Log()
    manager = log.manager
    log.produce(batch(1, 0, 0, 2))  # kio writes the batch with _TS as its timestamps
    log.produce(batch(2, 0, 0, 1, transactional=True))
    ts = int(_TS.timestamp() * 1000)
    assert manager.expire(ts + 1000, 1000) == 0  # idle exactly max_idle: kept
    assert manager.expire(ts + 1001, 1000) == 1  # producer 1 forgotten, the open txn kept
    assert set(manager.partition("t", 0).entries) == {2}
    assert log.produce(batch(1, 0, 7)) == 3  # an expired producer is new again: any sequence
    log.log.append_control(2, 0, True, ts + 5000)
    assert manager.expire(ts + 5500, 1000) == 1  # producer 1 again; 2 was active at ts + 5000
    assert set(manager.partition("t", 0).entries) == {2}
    assert manager.expire(ts + 6001, 1000) == 1
