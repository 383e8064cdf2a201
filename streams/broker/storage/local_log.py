"""`LocalLog`: the segment files of one partition directory (Kafka's `LocalLog`).

Below `PartitionLog` (Kafka's `UnifiedLog`) and above `LogSegments`: it owns
the segments, the log end offset (the next offset to write) and the flushed
offset (Kafka's recovery point), and does the file work on them: writing
batches at the end, rolling, picking the file ranges of a read, flushing,
truncating, closing and deleting. What the log means to producers and
consumers (validation, the log start offset, the high watermark, transactions,
retention) stays in `PartitionLog`.

I/O errors: a failed write, roll or fsync takes the log directory offline
(`LogDirFailureChannel`) before the error goes up; from then on every method
that touches the files raises `KafkaStorageError`, and `close` leaves no
clean-shutdown marker, so the next start recovers the directory.

Concurrency contract: not thread-safe. `PartitionLog` calls every method with
its lock held, except `fsync`, which it runs outside the lock so appends go on
while a flush is in progress.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from streams.broker.errors import KafkaStorageError
from streams.broker.storage.batch import BatchHeader, write_buffers
from streams.broker.storage.config import LogConfig
from streams.broker.storage.file_records import Slice
from streams.broker.storage.files import CLEAN_SHUTDOWN_FILE
from streams.broker.storage.index import fsync_path
from streams.broker.storage.log_dir import LogDirFailureChannel
from streams.broker.storage.log_segments import LogSegments

logger = logging.getLogger(__name__)

__all__ = ["LocalLog"]


class LocalLog:
    """Segments, log end offset and flushed offset of one partition; see the module docstring."""

    def __init__(
        self,
        directory: Path,
        segments: LogSegments,
        *,
        next_offset: int,
        name: str,
        now_ms: int,
        failures: LogDirFailureChannel,
    ) -> None:
        self.directory = directory
        self.log_dir = directory.parent
        self.failures = failures
        self.name = name
        self.segments = segments
        self.next_offset = next_offset
        # What was on disk when we opened counts as durable (it is all we have).
        self.flushed_offset = next_offset
        self.unflushed_messages = 0
        self.last_flush_ms = now_ms
        self.closed = False

    @property
    def dirty(self) -> bool:
        return self.flushed_offset < self.next_offset or self.segments.dirty

    def check_open(self) -> None:
        if self.closed:
            raise KafkaStorageError(
                f"Log `{self.name}` is closed (its topic was deleted or the broker is "
                "shutting down); reopen it through LogManager.get_log.",
                path=str(self.directory),
            )
        self.failures.check(self.log_dir, name=self.name)

    @property
    def offline(self) -> bool:
        return self.failures.is_offline(self.log_dir)

    def fail(self, action: str, error: OSError) -> None:
        """Take the log dir offline after `error` while doing `action` (see the module doc)."""
        self.failures.maybe_add_offline_log_dir(
            self.log_dir, f"log {self.name}: {action} failed", error
        )

    # -- append -------------------------------------------------------------------

    def append(
        self,
        records: bytes | bytearray | memoryview,
        headers: list[BatchHeader],
        *,
        count: int,
        now: int,
        config: LogConfig,
        log_append_time_ms: int | None,
    ) -> int:
        """Write validated batches at the log end offset (rolling first if due); returns
        the offset given to the first one."""
        first = self.next_offset
        size = len(records)
        try:
            segment = self.segments.maybe_roll(first, size, count, now, config)
            buffers = write_buffers(records, headers, first, log_append_time_ms=log_append_time_ms)
            segment.append(buffers, size, headers, first)
        except OSError as e:
            # A short write leaves bytes past the segment's size that nobody may read or
            # overwrite: the directory goes offline and recovery truncates them.
            self.fail(f"append of {count} records at offset {first}", e)
            raise
        self.next_offset = first + count
        self.unflushed_messages += count
        return first

    def roll(self, now: int, *, index_interval_bytes: int) -> None:
        self.segments.roll(self.next_offset, now, index_interval_bytes=index_interval_bytes)

    # -- read ---------------------------------------------------------------------

    def slices(
        self, offset: int, max_bytes: int, limit: int, *, min_one: bool = True
    ) -> list[Slice]:
        """Ranges of whole batches from the one holding `offset`, below `limit`.

        At most `max_bytes` in total, except that the first batch is included
        even when larger if `min_one` (without it, nothing is returned then). Later segments are read only once a segment was read to its
        end, so a fetch is not under-filled because a segment ended. The caller
        has checked that `offset` is inside the log.
        """
        out: list[Slice] = []
        budget = max_bytes
        for seg in self.segments.from_offset(offset):
            if seg.base_offset >= limit:
                break
            first = seg.find_batch(offset)
            if first is None:
                continue  # nothing at or after `offset` here (an empty or compacted segment)
            if (out or not min_one) and first.size > budget:
                break
            start, end = seg.batch_range(first, max(budget, 1), limit)
            if end <= start:
                break
            out.append((seg, start, end))
            budget -= end - start
            if budget <= 0 or end < seg.size:
                break  # stopped by the budget or by `limit` inside this segment
            offset = seg.next_offset
        return out

    # -- flush --------------------------------------------------------------------

    def begin_flush(self, now_ms: int) -> tuple[int, list[int | Path]]:
        """The end offset the flush will make durable, and what to pass to `fsync`."""
        end = self.next_offset
        todo = self.segments.begin_flush()
        self.unflushed_messages = 0
        self.last_flush_ms = now_ms
        return end, todo

    def fsync(self, todo: list[int | Path], end: int) -> None:
        """fsync what `begin_flush` returned (descriptors are duplicates, closed here).

        A failure takes the log dir offline and is raised: the flushed offset, and
        so the high watermark under durability=sync, must not move past data the
        disk may not hold (Kafka's recovery point only advances on a good flush).
        """
        try:
            for i, item in enumerate(todo):
                if isinstance(item, Path):
                    fsync_path(item)
                else:
                    os.fsync(item)
                    os.close(item)
                    todo[i] = -1
        except OSError as e:
            self.fail(f"fsync up to offset {end}", e)
            raise
        finally:
            for item in todo:
                if isinstance(item, int) and item >= 0:
                    os.close(item)

    def end_flush(self, end: int) -> None:
        if end > self.flushed_offset:
            self.flushed_offset = min(end, self.next_offset)

    def flush_due(self, now_ms: int, config: LogConfig) -> bool:
        """Whether flush.messages / flush.ms ask for a flush now."""
        if self.unflushed_messages == 0 and not self.dirty:
            return False
        return (
            config.durability == "sync"
            or self.unflushed_messages >= config.flush_messages
            or now_ms - self.last_flush_ms >= config.flush_ms
        )

    # -- truncation and lifecycle ---------------------------------------------------

    def truncate_to(self, offset: int, now: int, *, index_interval_bytes: int) -> int:
        """Remove batches at and after `offset` (whole batches); returns the new end offset."""
        self.next_offset = self.segments.truncate_to(
            offset, now, index_interval_bytes=index_interval_bytes
        )
        self.flushed_offset = min(self.flushed_offset, self.next_offset)
        return self.next_offset

    def close(self) -> None:
        """Flush, close the files and mark the shutdown clean (next open skips the scan).

        An offline log is closed without a flush or the marker: the next open
        recovers it."""
        if self.offline:
            self.closed = True
            self.segments.close()
            logger.warning("Log %s: closed offline, without a clean-shutdown marker", self.name)
            return
        try:
            self.segments.flush_all()
        except OSError as e:
            self.fail("flush at close", e)
            self.closed = True
            self.segments.close()
            raise
        self.closed = True
        self.segments.close()
        (self.directory / CLEAN_SHUTDOWN_FILE).write_bytes(b"")

    def delete(self) -> None:
        """Remove every segment file, without a clean-shutdown marker."""
        self.closed = True
        self.segments.delete_all()
