"""`LogSegment`: one `.log` file of record batches and its sparse indexes.

A segment holds the batches with offsets in [base_offset, next_offset). Batches
are written exactly as given (offsets already assigned by `PartitionLog`); the
segment adds an `OffsetIndex` and `TimeIndex` entry once at least
`index.interval.bytes` were appended since the previous entry.

Reads use `os.pread` on a descriptor kept open for the segment's life, so they
need no seek and are safe from any thread. Concurrency: one writer (the
partition's owner); `flush()` may run concurrently in a thread pool (it only
fsyncs descriptors); `PartitionLog` serialises the rest.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from streams.broker.errors import CorruptMessageError
from streams.broker.storage.batch import (
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    check_batch,
)
from streams.broker.storage.files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_file,
)
from streams.broker.storage.index import OffsetIndex, TimeIndex, TransactionIndex, fsync_path
from streams.broker.storage.producer_state import PartitionProducers
from streams.broker.storage.records import first_at_or_after, is_abort_marker

logger = logging.getLogger(__name__)

_SCAN_CHUNK = 4 * 1024 * 1024
_IOV_MAX = min(os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024, 1024)


def _pwritev_all(fd: int, buffers: list[bytes | memoryview], position: int, size: int) -> None:
    """Gather-write every buffer at `position`; retries short writes (signals, big writes)."""
    written = os.pwritev(fd, buffers, position) if len(buffers) <= _IOV_MAX else 0
    if written == size:
        return
    data = memoryview(b"".join(buffers))
    while written < size:
        written += os.pwrite(fd, data[written:], position + written)


class LogSegment:
    """A `.log` file plus `.index`, `.timeindex` and `.txnindex`, named by base offset."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        created_ms: int = 0,
        log_suffix: str = "",
    ) -> None:
        self.directory = Path(directory)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path = segment_file(self.directory, base_offset, LOG_SUFFIX)
        if log_suffix:
            self.log_path = self.log_path.with_name(self.log_path.name + log_suffix)
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size
        self.offset_index = OffsetIndex(
            segment_file(self.directory, base_offset, INDEX_SUFFIX), base_offset
        )
        self.time_index = TimeIndex(
            segment_file(self.directory, base_offset, TIME_INDEX_SUFFIX), base_offset
        )
        self.txn_index = TransactionIndex(
            segment_file(self.directory, base_offset, TXN_INDEX_SUFFIX)
        )
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.created_ms = created_ms
        self._bytes_since_index = 0
        self._dirty = False
        self.closed = False

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, next_offset={self.next_offset}, size={self.size})"

    # -- writing -------------------------------------------------------------------

    def append(
        self,
        buffers: list[bytes | memoryview],
        size: int,
        headers: list[BatchHeader],
        first_offset: int,
    ) -> None:
        """Write `buffers` (`size` bytes: the batches of `headers`) at the end of the file."""
        start = self.size
        _pwritev_all(self._fd, buffers, start, size)
        self.size = start + size
        self._dirty = True
        self._index_batches(headers, first_offset, start)

    def _index_batches(self, headers: list[BatchHeader], first_offset: int, start: int) -> None:
        offset = first_offset
        interval = self.index_interval_bytes
        for h in headers:
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp = h.max_timestamp
                self.offset_of_max_timestamp = offset
            if self._bytes_since_index >= interval or interval == 0:
                self.offset_index.append(offset, start + h.position)
                self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp)
                self._bytes_since_index = 0
            self._bytes_since_index += h.batch_length + LOG_OVERHEAD
            offset += h.last_offset_delta + 1
        self.next_offset = offset

    def on_become_inactive(self) -> None:
        """Called on roll: record the segment's max timestamp in the time index."""
        if (
            self.max_timestamp > self.time_index.last_timestamp
            and self.next_offset > self.base_offset
        ):
            self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp)

    # -- reading -------------------------------------------------------------------

    def read_at(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

    def dup_fd(self) -> int:
        """A new descriptor of the `.log` file: it stays readable after the segment
        is closed or deleted (zero-copy sends outlive the lock they were sliced under)."""
        return os.dup(self._fd)

    def header_at(self, position: int) -> BatchHeader | None:
        raw = os.pread(self._fd, HEADER_SIZE, position)
        if len(raw) < HEADER_SIZE:
            return None
        return BatchHeader(*HEADER.unpack(raw), position=position)

    def scan_headers(self, position: int = 0) -> Iterator[BatchHeader]:
        """Headers from `position` to the end, without CRC checks (positions absolute).

        Stops early at a header that cannot be right (length past the end, wrong
        magic, offsets going back): damage inside a flushed segment is not checked
        at open (as in Kafka), so reads must not trust it blindly.
        """
        end = self.size
        last = -1
        while position + HEADER_SIZE <= end:
            h = self.header_at(position)
            if (
                h is None
                or h.batch_length < HEADER_SIZE - LOG_OVERHEAD
                or position + h.batch_length + LOG_OVERHEAD > end
                or h.magic != MAGIC
                or h.base_offset <= last
                or h.last_offset_delta < 0
            ):
                if h is not None:
                    logger.error(
                        "Segment %s: unreadable batch header at byte %d; reads stop there",
                        self.log_path,
                        position,
                    )
                return
            last = h.base_offset + h.last_offset_delta
            yield h
            position += h.batch_length + LOG_OVERHEAD

    def find_batch(self, offset: int) -> BatchHeader | None:
        """The header of the first batch whose last offset >= `offset`, or None."""
        if offset >= self.next_offset:
            return None
        _, position = self.offset_index.lookup(offset)
        for h in self.scan_headers(position):
            if h.base_offset + h.last_offset_delta >= offset:
                return h
        return None

    def read_batches(self, first: BatchHeader, max_bytes: int, limit: int) -> bytes:
        """Whole batches from `first` up to `max_bytes` (at least `first`), all below `limit`."""
        start, end = self.batch_range(first, max_bytes, limit)
        return self.read_at(start, end - start) if end > start else b""

    def batch_range(self, first: BatchHeader, max_bytes: int, limit: int) -> tuple[int, int]:
        """File positions [start, end) of the batches `read_batches` would return.

        Batch boundaries come from the offset index plus a short header scan,
        never from reading the records.
        """
        if first.last_offset >= limit:
            return first.position, first.position
        start = first.position
        end = self.size
        if limit < self.next_offset:
            stop = self.find_batch(limit)
            if stop is not None:
                end = stop.position
        want = start + max_bytes
        if want < end:
            positions = self.offset_index.positions
            i = bisect.bisect_right(positions, want) - 1
            pos = positions[i] if i >= 0 and positions[i] > start else start
            cut = max(start + first.size, pos)  # an index entry is a batch boundary
            for h in self.scan_headers(pos):
                nxt = h.position + h.size
                if nxt > want:
                    break
                cut = nxt
            end = max(cut, start + first.size)
        return start, end

    def find_timestamp(self, timestamp_ms: int, min_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `timestamp_ms` here."""
        first = self.find_batch(max(self.time_index.lookup_before(timestamp_ms), min_offset))
        if first is None:
            return None
        for h in self.scan_headers(first.position):
            if h.max_timestamp >= timestamp_ms and h.last_offset >= min_offset:
                found = first_at_or_after(self.read_at(h.position, h.size), timestamp_ms)
                return found if found is not None else (h.base_offset, h.max_timestamp)
        return None

    def iter_valid(self, position: int = 0, *, contiguous: bool = False) -> Iterator[BatchHeader]:
        """Validated headers (CRC included) from `position`; stops at the first bad batch.

        After exhaustion, `self.valid_end` is the byte after the last good batch.
        Reads the file in large chunks, so a scan is O(bytes) with one pread per chunk.
        The CRC does not cover baseOffset, so offsets are checked too: increasing,
        and with `contiguous` (segments never compacted) without gaps.
        """
        self.valid_end = position
        end = self.size
        expected = self.base_offset
        buf = b""
        buf_start = position
        while position < end:
            rel = position - buf_start
            if len(buf) - rel < LOG_OVERHEAD:
                buf = os.pread(self._fd, min(_SCAN_CHUNK, end - position), position)
                buf_start, rel = position, 0
            size = -1
            if len(buf) - rel >= LOG_OVERHEAD:
                size = int.from_bytes(buf[rel + 8 : rel + 12], "big", signed=True) + LOG_OVERHEAD
            if size < HEADER_SIZE or position + size > end:
                logger.warning(
                    "Segment %s: batch at byte %d is truncated (length %d, %d bytes left)",
                    self.log_path,
                    position,
                    size,
                    end - position,
                )
                return
            if rel + size > len(buf):
                buf = os.pread(self._fd, min(max(_SCAN_CHUNK, size), end - position), position)
                buf_start, rel = position, 0
            try:
                h = check_batch(buf, rel, rel + size)
            except CorruptMessageError as e:
                logger.warning(
                    "Segment %s: invalid batch at byte %d: %s", self.log_path, position, e
                )
                return
            if h.base_offset < expected or (contiguous and h.base_offset != expected):
                logger.warning(
                    "Segment %s: batch at byte %d has offset %d, expected >= %d",
                    self.log_path,
                    position,
                    h.base_offset,
                    expected,
                )
                return
            expected = h.base_offset + h.last_offset_delta + 1
            yield BatchHeader(*HEADER.unpack_from(buf, rel), position=position)
            position += size
            self.valid_end = position

    # -- recovery ------------------------------------------------------------------

    def recover(
        self, *, contiguous: bool = False, producers: PartitionProducers | None = None
    ) -> int:
        """Rebuild indexes by scanning the whole file; truncate a torn tail. Returns bytes cut.

        With `producers`, the producer state as of the segment's base offset, the
        transaction index is rebuilt from the log's abort markers too (Kafka's
        `LogSegment.recover`: a crash may have come between a marker and its index
        entry), and `producers` ends as of the segment's end. Without it, the entries
        the index already holds are kept, those past the new end dropped.
        """
        self.offset_index.reset()
        self.time_index.reset()
        if producers is not None:
            self.txn_index.reset()
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        self._bytes_since_index = 0
        self.next_offset = self.base_offset
        for h in self.iter_valid(0, contiguous=contiguous):
            self._index_batches([h], h.base_offset, 0)
            if producers is not None and h.producer_id >= 0:
                abort = h.is_control and is_abort_marker(self.read_at(h.position, h.size))
                aborted = producers.update(h, h.base_offset, abort=abort)
                if aborted is not None:
                    self.txn_index.append(aborted)
        valid_end = self.valid_end
        cut = self.size - valid_end
        if cut:
            logger.warning(
                "Segment %s: truncating %d bytes of torn or corrupt tail at byte %d (next offset %d)",
                self.log_path,
                cut,
                valid_end,
                self.next_offset,
            )
            self.truncate_bytes(valid_end)
        self.txn_index.truncate_to(self.next_offset)
        self.offset_index.write_pending()
        self.time_index.write_pending()
        return cut

    def truncate_bytes(self, position: int) -> None:
        os.ftruncate(self._fd, position)
        self.size = position
        self._dirty = True

    def truncate_to(self, offset: int) -> int:
        """Drop batches whose last offset >= `offset`; returns the new next offset."""
        h = self.find_batch(offset)
        if h is None:
            return self.next_offset
        self.truncate_bytes(h.position)
        self.offset_index.truncate_to(h.base_offset)
        self.time_index.truncate_to(h.base_offset)
        self.txn_index.truncate_to(h.base_offset)
        self.next_offset = h.base_offset
        self._recompute_tail_state()
        return self.next_offset

    def _recompute_tail_state(self) -> None:
        """Max timestamp and bytes-since-index from the last index entries (a short scan)."""
        if len(self.time_index):
            self.max_timestamp = self.time_index.timestamps[-1]
            self.offset_of_max_timestamp = self.time_index.offsets[-1]
        else:
            self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        position = self.offset_index.positions[-1] if len(self.offset_index) else 0
        self._bytes_since_index = self.size - position if len(self.offset_index) else self.size
        for h in self.scan_headers(position):
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = h.max_timestamp, h.base_offset

    # -- lifecycle -----------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        return self._dirty or self.txn_index._dirty

    def begin_flush(self, *, indexes: bool) -> list[int | Path]:
        """Under the log's lock: what a flush must fsync (descriptors or index paths);
        clears the dirty marks. Descriptors are duplicates the caller closes: the fsync
        runs outside the lock, and a segment deleted meanwhile must not turn it into
        an EBADF (or the fsync of whatever file reused the number).

        Offset/time indexes are only made durable for inactive segments
        (`indexes=True`): the active segment's indexes are rebuilt after an
        unclean shutdown anyway. The transaction index is always made durable:
        it cannot be rebuilt from the log.
        """
        todo: list[int | Path] = []
        if self._dirty:
            self._dirty = False
            todo.append(os.dup(self._fd))
        parts = [self.txn_index] + ([self.offset_index, self.time_index] if indexes else [])
        for idx in parts:
            path = idx.take_dirty()
            if path is not None:
                todo.append(path)
        return todo

    def flush(self) -> None:
        """fsync the log and every index now."""
        todo = self.begin_flush(indexes=True)
        try:
            for item in todo:
                if isinstance(item, int):
                    os.fsync(item)
                else:
                    fsync_path(item)
        finally:
            for item in todo:
                if isinstance(item, int):
                    os.close(item)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        os.close(self._fd)
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()

    def delete(self) -> None:
        """Close and remove every file of the segment."""
        for idx in (self.offset_index, self.time_index, self.txn_index):
            idx.delete()
        self.close()
        self.log_path.unlink(missing_ok=True)
