"""Sparse indexes of a segment: `OffsetIndex`, `TimeIndex`, and `TransactionIndex`.

File layouts (big-endian, fixed width, append-only, no header; Kafka's own
layouts except that files are not preallocated):

- `.index`: entries of `relativeOffset int32, position int32` (8 bytes); the
  relative offset is `offset - segment base offset` of a batch's base offset.
- `.timeindex`: entries of `timestamp int64, relativeOffset int32` (12 bytes):
  the largest batch max-timestamp seen so far and the base offset of the batch
  that has it. Timestamps strictly increase from entry to entry.
- `.txnindex`: entries of `version int16 (0), producerId int64, firstOffset
  int64, lastOffset int64, lastStableOffset int64` (34 bytes), one per aborted
  transaction whose abort marker is in the segment.

The entries live in memory too (arrays), so lookups never touch the disk; the
files exist to make opening a large segment cheap. A damaged index is simply
rebuilt from the log by `LogLoader`.

Concurrency: owned by one `LogSegment`; mutated from the log's writer thread,
`flush()` may run in another thread (it only fsyncs the descriptor).
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path
from typing import NamedTuple

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TXN_ENTRY = struct.Struct(">hqqqq")


class _IndexFile:
    """An append-only file of fixed-width entries.

    Holds no file descriptor between operations (a broker with many partitions
    and segments would otherwise need four descriptors per segment): entries are
    buffered and written by `write_pending()` at flush, roll and close.
    """

    entry_size: int

    def __init__(self, path: Path) -> None:
        self.path = path
        self._dirty = False  # written but not fsynced
        # Entries not yet written; the in-memory arrays are the truth meanwhile.
        self._pending = bytearray()
        self._pending_at = 0

    def _read_all(self) -> bytes:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return b""

    def _write_entry(self, data: bytes, count: int) -> None:
        if not self._pending:
            self._pending_at = count
        self._pending += data

    def _write_at(self, data: bytes | bytearray, position: int, *, truncate: bool = False) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if truncate:
                os.ftruncate(fd, position)
            if data:
                os.pwrite(fd, data, position)
        finally:
            os.close(fd)
        self._dirty = True

    def write_pending(self) -> None:
        """Write buffered entries to the file (no fsync)."""
        if self._pending:
            self._write_at(self._pending, self._pending_at * self.entry_size)
            self._pending = bytearray()

    def _truncate_entries(self, count: int) -> None:
        if self._pending and count >= self._pending_at:
            del self._pending[(count - self._pending_at) * self.entry_size :]
            return
        self._pending = bytearray()
        self._write_at(b"", count * self.entry_size, truncate=True)

    def _rewrite(self, data: bytes) -> None:
        self._pending = bytearray()
        self._write_at(data, 0, truncate=True)

    def take_dirty(self) -> Path | None:
        """Write pending entries; the path to fsync if anything was written since the last."""
        self.write_pending()
        if not self._dirty:
            return None
        self._dirty = False
        return self.path

    def flush(self) -> None:
        path = self.take_dirty()
        if path is not None:
            fsync_path(path)

    def close(self) -> None:
        self.write_pending()

    def delete(self) -> None:
        self._pending = bytearray()
        self.path.unlink(missing_ok=True)


def fsync_path(path: Path) -> None:
    """fsync a file by name; a file deleted meanwhile needs no fsync."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class OffsetIndex(_IndexFile):
    """Sparse map offset -> byte position in the segment's `.log`."""

    entry_size = _OFFSET_ENTRY.size

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path)
        self.base_offset = base_offset
        self.offsets = array("q")
        self.positions = array("q")

    def __len__(self) -> int:
        return len(self.offsets)

    def load(self, log_size: int) -> bool:
        """Read the file; False (and empty) when it is damaged or inconsistent with the log."""
        data = self._read_all()
        self.offsets, self.positions = array("q"), array("q")
        if len(data) % self.entry_size:
            return False
        last_off, last_pos = -1, -1
        base = self.base_offset
        for rel, pos in _OFFSET_ENTRY.iter_unpack(data):
            if rel <= last_off or pos <= last_pos or pos < 0 or pos >= log_size:
                self.offsets, self.positions = array("q"), array("q")
                return False
            last_off, last_pos = rel, pos
            self.offsets.append(base + rel)
            self.positions.append(pos)
        return True

    def append(self, offset: int, position: int) -> None:
        if self.offsets and offset <= self.offsets[-1]:
            return
        n = len(self.offsets)
        self.offsets.append(offset)
        self.positions.append(position)
        self._write_entry(_OFFSET_ENTRY.pack(offset - self.base_offset, position), n)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The last entry with entry offset <= `offset`, or (base offset, 0)."""
        i = bisect.bisect_right(self.offsets, offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.offsets[i], self.positions[i]

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= `offset`."""
        n = bisect.bisect_left(self.offsets, offset)
        if n < len(self.offsets):
            del self.offsets[n:]
            del self.positions[n:]
            self._truncate_entries(n)

    def reset(self) -> None:
        self.offsets, self.positions = array("q"), array("q")
        self._rewrite(b"")


class TimeIndex(_IndexFile):
    """Sparse map max-timestamp-so-far -> base offset of the batch that has it."""

    entry_size = _TIME_ENTRY.size

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path)
        self.base_offset = base_offset
        self.timestamps = array("q")
        self.offsets = array("q")

    def __len__(self) -> int:
        return len(self.timestamps)

    def load(self, next_offset: int) -> bool:
        data = self._read_all()
        self.timestamps, self.offsets = array("q"), array("q")
        if len(data) % self.entry_size:
            return False
        last_ts, last_off = None, -1
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            off = self.base_offset + rel
            if (last_ts is not None and ts <= last_ts) or off < last_off or off >= next_offset:
                self.timestamps, self.offsets = array("q"), array("q")
                return False
            last_ts, last_off = ts, off
            self.timestamps.append(ts)
            self.offsets.append(off)
        return True

    @property
    def last_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def append(self, timestamp: int, offset: int) -> None:
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return
        n = len(self.timestamps)
        self.timestamps.append(timestamp)
        self.offsets.append(offset)
        self._write_entry(_TIME_ENTRY.pack(timestamp, offset - self.base_offset), n)

    def lookup_before(self, timestamp: int) -> int:
        """The offset of the last entry with timestamp < `timestamp`, or the base offset.

        Every batch before that offset has a max timestamp < `timestamp`.
        """
        i = bisect.bisect_left(self.timestamps, timestamp) - 1
        return self.offsets[i] if i >= 0 else self.base_offset

    def truncate_to(self, offset: int) -> None:
        n = bisect.bisect_left(self.offsets, offset)
        if n < len(self.offsets):
            del self.timestamps[n:]
            del self.offsets[n:]
            self._truncate_entries(n)

    def reset(self) -> None:
        self.timestamps, self.offsets = array("q"), array("q")
        self._rewrite(b"")


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex(_IndexFile):
    """Aborted transactions whose abort marker lies in this segment."""

    entry_size = _TXN_ENTRY.size

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entries: list[AbortedTxn] = []

    def load(self) -> bool:
        data = self._read_all()
        self.entries = []
        usable = len(data) - len(data) % self.entry_size
        for version, pid, first, last, lso in _TXN_ENTRY.iter_unpack(data[:usable]):
            if version != 0 or first > last:
                self.entries = []
                return False
            self.entries.append(AbortedTxn(pid, first, last, lso))
        return usable == len(data)

    def append(self, txn: AbortedTxn) -> None:
        n = len(self.entries)
        self.entries.append(txn)
        self._write_entry(_TXN_ENTRY.pack(0, *txn), n)
        self.write_pending()  # cannot be rebuilt from the log: always on disk at the next flush

    def truncate_to(self, offset: int) -> None:
        """Drop transactions whose abort marker is at or after `offset`."""
        keep = [t for t in self.entries if t.last_offset < offset]
        if len(keep) != len(self.entries):
            self.entries = keep
            self._rewrite(b"".join(_TXN_ENTRY.pack(0, *t) for t in keep))

    def reset(self) -> None:
        self.entries = []
        self._rewrite(b"")
