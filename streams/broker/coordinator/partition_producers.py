"""One partition's idempotent producers: epochs, sequence windows, open transactions.

``PartitionProducers`` keeps, per producer id, the epoch, the sequence ranges
and offsets of the last five batches and the first offset of its open
transaction (Kafka's ``ProducerStateEntry``). ``check`` decides on a batch
before it is appended (``Duplicate``, ``Rejected`` or ``None``), ``update``
records it afterwards (Kafka's ``ProducerAppendInfo``). ``iter_batch_info``
reads the fixed 61-byte RecordBatch header those checks need, never the
records. ``ProducerStateManager`` (producer_state.py) holds one of these per
partition.

Concurrency contract: not thread-safe; called from the broker's loop thread.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

__all__ = [
    "BatchInfo",
    "Duplicate",
    "PartitionProducers",
    "ProducerEntry",
    "Rejected",
    "iter_batch_info",
]

# baseOffset, batchLength, leaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount
_HEADER = struct.Struct(">qiibIhiqqqhii")
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_MAX_CACHED_BATCHES = 5
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class BatchInfo:
    """The header fields of one RecordBatch v2 the producer checks need."""

    position: int
    size: int
    record_count: int
    last_offset_delta: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    attributes: int
    base_offset: int = 0
    max_timestamp: int = -1

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (_INT32_MAX + 1)


def iter_batch_info(buf: bytes | memoryview) -> Iterator[BatchInfo]:
    """Header of every whole magic-2 batch in ``buf`` (a trailing partial batch is skipped)."""
    pos, end = 0, len(buf)
    while end - pos >= _HEADER.size:
        (base, length, _, magic, _, attrs, lod, _, max_ts, pid, epoch, seq, count) = (
            _HEADER.unpack_from(buf, pos)
        )
        size = 12 + length
        if magic != 2 or length < _HEADER.size - 12 or end - pos < size:
            return
        yield BatchInfo(pos, size, count, lod, pid, epoch, seq, attrs, base, max_ts)
        pos += size


@dataclass(frozen=True)
class Duplicate:
    base_offset: int


@dataclass(frozen=True)
class Rejected:
    error: ErrorCode
    message: str


@dataclass
class _CachedBatch:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    epoch: int = -1
    batches: deque[_CachedBatch] = field(default_factory=lambda: deque(maxlen=_MAX_CACHED_BATCHES))
    txn_first_offset: int | None = None
    txn_last_offset: int = -1
    last_timestamp_ms: int = -1  # of its latest batch or marker: idle producers expire

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


class PartitionProducers:
    """Producer entries of one partition."""

    def __init__(self) -> None:
        self.entries: dict[int, ProducerEntry] = {}
        # producer id -> first offset of its open transaction: the LSO is asked on every
        # read_committed fetch, so it must not walk every producer the partition ever saw
        self._open: dict[int, int] = {}

    def check(self, batch: BatchInfo) -> Duplicate | Rejected | None:
        if batch.producer_id < 0:
            return None
        entry = self.entries.get(batch.producer_id)
        if entry is None or entry.epoch < 0:
            # unknown producer (new, or its state expired): accept any sequence (KIP-360)
            return None
        if batch.producer_epoch < entry.epoch:
            return Rejected(
                ErrorCode.invalid_producer_epoch,
                f"producer {batch.producer_id} epoch {batch.producer_epoch} is older than "
                f"the current epoch {entry.epoch}",
            )
        if batch.producer_epoch > entry.epoch:
            if batch.base_sequence != 0:
                return Rejected(
                    ErrorCode.out_of_order_sequence_number,
                    f"producer {batch.producer_id} new epoch {batch.producer_epoch} must start "
                    f"at sequence 0, got {batch.base_sequence}",
                )
            return None
        for cached in entry.batches:
            if cached.first_seq == batch.base_sequence and cached.last_seq == batch.last_sequence:
                return Duplicate(cached.first_offset)
        expected = (
            (entry.last_sequence + 1) % (_INT32_MAX + 1) if entry.batches else batch.base_sequence
        )
        if entry.batches and batch.base_sequence != expected:
            return Rejected(
                ErrorCode.out_of_order_sequence_number,
                f"producer {batch.producer_id} epoch {entry.epoch}: expected sequence {expected}, "
                f"got {batch.base_sequence}",
            )
        return None

    def update(self, batch: BatchInfo, base_offset: int) -> None:
        if batch.producer_id < 0:
            return
        entry = self.entries.setdefault(batch.producer_id, ProducerEntry())
        last_offset = base_offset + batch.last_offset_delta
        entry.last_timestamp_ms = max(entry.last_timestamp_ms, batch.max_timestamp)
        if batch.producer_epoch != entry.epoch:
            entry.batches.clear()
            entry.epoch = batch.producer_epoch
        if batch.is_control:
            entry.txn_first_offset = None
            entry.txn_last_offset = -1
            self._open.pop(batch.producer_id, None)
            return
        if batch.base_sequence >= 0:
            entry.batches.append(
                _CachedBatch(batch.base_sequence, batch.last_sequence, base_offset, last_offset)
            )
        if batch.is_transactional:
            if entry.txn_first_offset is None:
                entry.txn_first_offset = base_offset
                self._open[batch.producer_id] = base_offset
            entry.txn_last_offset = last_offset

    def to_json(self) -> dict[str, Any]:
        return {
            str(pid): [
                e.epoch,
                [[b.first_seq, b.last_seq, b.first_offset, b.last_offset] for b in e.batches],
                e.txn_first_offset,
                e.txn_last_offset,
                e.last_timestamp_ms,
            ]
            for pid, e in self.entries.items()
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PartitionProducers:
        state = cls()
        for pid, (epoch, batches, first, last, *rest) in data.items():
            ts = rest[0] if rest else -1
            entry = ProducerEntry(
                epoch=epoch, txn_first_offset=first, txn_last_offset=last, last_timestamp_ms=ts
            )
            entry.batches.extend(_CachedBatch(*b) for b in batches)
            state.entries[int(pid)] = entry
            if first is not None:
                state._open[int(pid)] = first
        return state

    def first_unstable_offset(self) -> int | None:
        return min(self._open.values()) if self._open else None

    def expire(self, before_ms: int) -> int:
        """Forget producers idle since before ``before_ms`` with no open transaction."""
        idle = [
            pid
            for pid, e in self.entries.items()
            if e.txn_first_offset is None and e.last_timestamp_ms < before_ms
        ]
        for pid in idle:
            del self.entries[pid]
        return len(idle)

    def end_transaction(
        self, producer_id: int, epoch: int, now_ms: int = -1
    ) -> tuple[int, int] | None:
        """Close the producer's open transaction; ``(first, last)`` offsets of it, if any."""
        entry = self.entries.setdefault(producer_id, ProducerEntry())
        entry.last_timestamp_ms = max(entry.last_timestamp_ms, now_ms)
        if epoch > entry.epoch:
            entry.batches.clear()
            entry.epoch = epoch
        if entry.txn_first_offset is None:
            return None
        span = (entry.txn_first_offset, entry.txn_last_offset)
        entry.txn_first_offset = None
        entry.txn_last_offset = -1
        self._open.pop(producer_id, None)
        return span
