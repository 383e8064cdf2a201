"""`LogSegments`: the ordered segments of one partition and the file work on them.

Kafka's `LogSegments`: lookups by offset (the segment holding an
offset, the segments from it on), rolling a new active segment, removing
segments from either end, swapping in a compacted one, and the per-segment
loops of flush, close and delete. Offsets that belong to the log as a whole
stay above it: the log end and flushed offsets in `LocalLog`, the log start
offset and high watermark in `PartitionLog`.

Concurrency contract: not thread-safe. `PartitionLog` (directly or through
`LocalLog`) calls every method with its lock held, and additionally
`segments_lock` for whatever deletes files.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

from streams.broker.storage.config import LogConfig
from streams.broker.storage.segment import LogSegment

logger = logging.getLogger(__name__)

__all__ = ["LogSegments"]

_MAX_RELATIVE_OFFSET = 2**31 - 1


class LogSegments:
    """The segments of a partition directory, oldest first; the last one is active."""

    def __init__(
        self,
        directory: Path,
        segments: list[LogSegment],
        *,
        name: str,
        on_roll: Callable[[int], None] | None = None,
    ) -> None:
        self.directory = directory
        self.name = name
        # called with the new segment's base offset before it is created (the producer
        # state snapshot as of that offset, `PartitionLog`)
        self._on_roll = on_roll
        self._segments = segments
        self._bases = [s.base_offset for s in segments]

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    def __getitem__(self, i: int) -> LogSegment:
        return self._segments[i]

    def snapshot(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def dirty(self) -> bool:
        return any(s.dirty for s in self._segments)

    # -- lookups -------------------------------------------------------------------

    def segment_for(self, offset: int) -> LogSegment:
        """The segment holding `offset` (the first one for offsets before it)."""
        return self._segments[self._floor(offset)]

    def from_offset(self, offset: int) -> list[LogSegment]:
        """The segment holding `offset` and every later one."""
        return self._segments[self._floor(offset) :]

    def _floor(self, offset: int) -> int:
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[tuple[int, int]]:
        """`(producer_id, first_offset)` of aborted transactions overlapping [start, end)."""
        out = []
        for seg in self.from_offset(start_offset):
            for t in seg.txn_index.entries:
                if t.last_offset >= start_offset and t.first_offset < end_offset:
                    out.append((t.producer_id, t.first_offset))
        return out

    def offset_for_timestamp(self, timestamp_ms: int, log_start: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `timestamp_ms`, not before
        `log_start`; None when every record is older."""
        for seg in self._segments:
            if seg.max_timestamp >= timestamp_ms:
                found = seg.find_timestamp(timestamp_ms, log_start)
                if found is not None:
                    return max(found[0], log_start), found[1]
        return None

    # -- changes -------------------------------------------------------------------

    def maybe_roll(
        self, next_offset: int, size: int, count: int, now: int, config: LogConfig
    ) -> LogSegment:
        """The segment to append `count` records of `size` bytes at `next_offset` to:
        the active one, or a new one when segment.bytes, segment.ms or the 32-bit
        relative offsets of the index would be exceeded."""
        seg = self._segments[-1]
        if seg.size == 0:
            if seg.next_offset == seg.base_offset:
                seg.created_ms = now
            return seg
        if (
            seg.size + size > config.segment_bytes
            or now - seg.created_ms >= config.segment_ms
            or next_offset + count - 1 - seg.base_offset > _MAX_RELATIVE_OFFSET
        ):
            return self.roll(next_offset, now, index_interval_bytes=config.index_interval_bytes)
        return seg

    def roll(self, next_offset: int, now: int, *, index_interval_bytes: int) -> LogSegment:
        """Make a new empty segment at `next_offset` the active one."""
        if self._on_roll is not None:
            self._on_roll(next_offset)
        self._segments[-1].on_become_inactive()
        seg = LogSegment(
            self.directory, next_offset, index_interval_bytes=index_interval_bytes, created_ms=now
        )
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
        logger.info("Log %s: rolled new segment at offset %d", self.name, seg.base_offset)
        return seg

    def delete_first(self, count: int, *, reason: str) -> int:
        """Delete the `count` oldest segments (never the active one); returns how many."""
        deleted = 0
        while deleted < count and len(self._segments) > 1:
            seg = self._segments.pop(0)
            self._bases.pop(0)
            seg.delete()
            deleted += 1
            logger.info("Log %s: %s segment %d", self.name, reason, seg.base_offset)
        return deleted

    def delete_below(self, offset: int) -> int:
        """Delete leading segments whose batches are all < `offset` (keeps the active one)."""
        count = 0
        while count + 1 < len(self._segments) and self._segments[count + 1].base_offset <= offset:
            count += 1
        return self.delete_first(count, reason="deleted")

    def truncate_to(self, offset: int, now: int, *, index_interval_bytes: int) -> int:
        """Remove batches at and after `offset` (whole batches); returns the new end offset."""
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            self._segments.pop().delete()
            self._bases.pop()
        seg = self._segments[-1]
        if offset > seg.base_offset:
            return seg.truncate_to(offset)
        seg.delete()
        self._segments[-1] = LogSegment(
            self.directory, offset, index_interval_bytes=index_interval_bytes, created_ms=now
        )
        self._bases[-1] = offset
        return offset

    def replace(self, old: list[LogSegment], new: LogSegment) -> None:
        """Swap `old` (consecutive segments) for `new`."""
        i = self._segments.index(old[0])
        self._segments[i : i + len(old)] = [new]
        self._bases = [s.base_offset for s in self._segments]

    def set_index_interval(self, index_interval_bytes: int) -> None:
        for seg in self._segments:
            seg.index_interval_bytes = index_interval_bytes

    def begin_flush(self) -> list[int | Path]:
        """What to fsync (see `LogSegment.begin_flush`); indexes only of inactive segments."""
        last = len(self._segments) - 1
        return [x for i, s in enumerate(self._segments) for x in s.begin_flush(indexes=i < last)]

    def flush_all(self) -> None:
        for seg in self._segments:
            seg.flush()

    def close(self) -> None:
        for seg in self._segments:
            seg.close()

    def delete_all(self) -> None:
        for seg in self._segments:
            seg.delete()
