"""Producer state of one partition (Kafka's `ProducerStateManager`) and its snapshots.

For every idempotent producer id the partition has seen, ``PartitionProducers``
keeps the epoch, the sequence ranges and offsets of its last five batches
(librdkafka and the Java client keep at most five in flight), the first offset
of its open transaction and the time of its latest batch (Kafka's
``ProducerStateEntry``). That is enough to

- acknowledge a retried batch with its original offset without a second
  append (``Duplicate``), reject a gap (OUT_OF_ORDER_SEQUENCE_NUMBER) or a
  zombie epoch (INVALID_PRODUCER_EPOCH): ``check``, before an append;
- know the first offset of the earliest open transaction (the last stable
  offset's bound) and, when an abort marker is appended or replayed, the span
  of the transaction it ends, which goes to the segment's ``.txnindex``:
  ``update``, from the batch headers of every append.

`PartitionLog` owns one and updates it under its lock in the same step as the
append, so a marker and its transaction-index entry are never apart. Only the
61-byte batch headers are read (and the one control record of a marker).

Snapshots: ``<offset>.snapshot`` in the partition directory (Kafka's name) is
the state as of that offset, written when a segment rolls (the new segment's
base offset) and at a clean shutdown (the log end). ``LogLoader`` loads the
latest readable snapshot not past the point it needs and replays the batch
headers after it, so a restart, clean or not, reads at most the segments
written since the last roll. The file is a CRC-32C line then the state as
JSON; one that fails its check is skipped for an older one (or the log start),
so a snapshot only ever saves work: the log stays the truth.

Concurrency contract: not thread-safe; `PartitionLog` calls it with its lock
held, except the coordinator's ``check`` and ``first_unstable_offset`` from the
loop thread, which is also the only thread that appends.
"""

from __future__ import annotations

import json
import logging
import os
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crc32c import crc32c
from kio.schema.errors import ErrorCode

from streams.broker.storage.batch import HEADER, HEADER_SIZE, LOG_OVERHEAD, MAGIC, BatchHeader
from streams.broker.storage.files import SNAPSHOT_SUFFIX, base_offset_of, segment_file
from streams.broker.storage.index import AbortedTxn

logger = logging.getLogger(__name__)

__all__ = [
    "Duplicate",
    "PartitionProducers",
    "ProducerEntry",
    "Rejected",
    "delete_snapshots",
    "iter_headers",
    "last_sequence",
    "read_snapshot",
    "snapshot_offsets",
    "write_snapshot",
]

_MAX_CACHED_BATCHES = 5
_INT32_MAX = 2**31 - 1
_SNAPSHOT_VERSION = 1


def iter_headers(buf: bytes | bytearray | memoryview) -> Iterator[BatchHeader]:
    """Header of every whole magic-2 batch in ``buf``; stops quietly at a partial or
    garbled one (the storage's validation answers for those)."""
    pos, end = 0, len(buf)
    while end - pos >= HEADER_SIZE:
        h = BatchHeader(*HEADER.unpack_from(buf, pos), position=pos)
        if h.magic != MAGIC or h.batch_length < HEADER_SIZE - LOG_OVERHEAD or end - pos < h.size:
            return
        yield h
        pos += h.size


def last_sequence(h: BatchHeader) -> int:
    if h.base_sequence < 0:
        return -1
    return (h.base_sequence + h.last_offset_delta) % (_INT32_MAX + 1)


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
    """Producer entries of one partition; see the module docstring."""

    def __init__(self) -> None:
        self.entries: dict[int, ProducerEntry] = {}
        # producer id -> first offset of its open transaction: the LSO is asked on every
        # read_committed fetch, so it must not walk every producer the partition ever saw
        self._open: dict[int, int] = {}

    def check(self, batch: BatchHeader) -> Duplicate | Rejected | None:
        """Decide on ``batch`` before it is appended: None to append it."""
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
        last_seq = last_sequence(batch)
        for cached in entry.batches:
            if cached.first_seq == batch.base_sequence and cached.last_seq == last_seq:
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

    def update(
        self, batch: BatchHeader, base_offset: int, *, abort: bool = False
    ) -> AbortedTxn | None:
        """Record ``batch``, appended at ``base_offset``. For a control batch ``abort``
        says whether it is an abort marker; the transaction it aborts is returned, for
        the ``.txnindex`` of the marker's segment (Kafka's ``CompletedTxn``)."""
        if batch.producer_id < 0:
            return None
        pid = batch.producer_id
        entry = self.entries.setdefault(pid, ProducerEntry())
        last_offset = base_offset + batch.last_offset_delta
        entry.last_timestamp_ms = max(entry.last_timestamp_ms, batch.max_timestamp)
        if batch.producer_epoch != entry.epoch:
            entry.batches.clear()
            entry.epoch = batch.producer_epoch
        if batch.is_control:
            first = entry.txn_first_offset
            entry.txn_first_offset = None
            entry.txn_last_offset = -1
            self._open.pop(pid, None)
            if not abort or first is None:
                return None
            # Kafka's lastStableOffset(completedTxn): where reads may go once it ended
            lso = min(self._open.values(), default=base_offset + 1)
            return AbortedTxn(pid, first, base_offset, lso)
        if batch.base_sequence >= 0:
            entry.batches.append(
                _CachedBatch(batch.base_sequence, last_sequence(batch), base_offset, last_offset)
            )
        if batch.is_transactional:
            if entry.txn_first_offset is None:
                entry.txn_first_offset = base_offset
                self._open[pid] = base_offset
            entry.txn_last_offset = last_offset
        return None

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
        for pid, (epoch, batches, first, last, ts) in data.items():
            entry = ProducerEntry(
                epoch=epoch, txn_first_offset=first, txn_last_offset=last, last_timestamp_ms=ts
            )
            entry.batches.extend(_CachedBatch(*b) for b in batches)
            state.entries[int(pid)] = entry
            if first is not None:
                state._open[int(pid)] = first
        return state


# -- snapshot files -----------------------------------------------------------------------


def snapshot_offsets(directory: Path) -> list[int]:
    """Offsets of the `<offset>.snapshot` files in `directory`, ascending."""
    out = []
    for entry in os.scandir(directory):
        if entry.name.endswith(SNAPSHOT_SUFFIX):
            offset = base_offset_of(entry.name)
            if offset is not None:
                out.append(offset)
    return sorted(out)


def write_snapshot(directory: Path, offset: int, state: PartitionProducers, *, sync: bool) -> None:
    """Write the state as of `offset` (replacing any older file of that offset).

    At a roll it is not fsynced (the roll happens on the append path): a snapshot
    lost or torn by a power failure fails its CRC and an older one is used."""
    body = json.dumps(
        {"version": _SNAPSHOT_VERSION, "producers": state.to_json()}, separators=(",", ":")
    ).encode()
    path = segment_file(directory, offset, SNAPSHOT_SUFFIX)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(b"%08x\n" % crc32c(body) + body)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def read_snapshot(directory: Path, offset: int) -> PartitionProducers | None:
    """The state in `<offset>.snapshot`, or None when it is missing or fails its check."""
    path = segment_file(directory, offset, SNAPSHOT_SUFFIX)
    try:
        raw = path.read_bytes()
        crc, body = raw[:8], raw[9:]
        if raw[8:9] != b"\n" or int(crc, 16) != crc32c(body):
            raise ValueError("checksum mismatch")
        data = json.loads(body)
        if data.get("version") != _SNAPSHOT_VERSION:
            raise ValueError(f"unknown version {data.get('version')!r}")
        return PartitionProducers.from_json(data["producers"])
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as e:
        logger.warning("Producer state snapshot %s is unreadable (%s); skipping it", path, e)
        return None


def delete_snapshots(
    directory: Path, *, below: int | None = None, above: int | None = None
) -> list[int]:
    """Remove snapshots at offsets < `below` or > `above`; returns their offsets."""
    gone = [
        o
        for o in snapshot_offsets(directory)
        if (below is not None and o < below) or (above is not None and o > above)
    ]
    for offset in gone:
        segment_file(directory, offset, SNAPSHOT_SUFFIX).unlink(missing_ok=True)
    return gone
