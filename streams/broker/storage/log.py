"""`PartitionLog`: the commit log of one partition (Kafka's `UnifiedLog`, single node).

    log = PartitionLog(path, config=LogConfig())
    info = log.append(batches)              # assigns offsets, never decodes records
    data = log.read(offset, 1 << 20, max_offset=log.high_watermark)
    log.flush()                              # or LogManager.flush_dirty() for many logs

Offsets: `log_start_offset` <= `high_watermark` <= `log_end_offset`. Under
`durability="interval"` the high watermark is the log end offset; under
`durability="sync"` it is the flushed offset, so consumers only see data that
survives a crash. The last stable offset (transactions) is the caller's: it is
`min(high_watermark, first offset of the oldest open transaction)`.

Producers and transactions: the log keeps its partition's producer state
(`producer_state.py`, Kafka's `ProducerStateManager`): every append updates it
from the batch headers under the log's lock, and an abort marker
(`append_control(...)`) adds the transaction it ends to the `.txnindex` of its
segment in the same step, so no reader sees the marker without the entry.
`aborted_transactions(start, end)` answers a read_committed fetch;
`producer_state.first_unstable_offset()` bounds its last stable offset. The
state is snapshotted to `<offset>.snapshot` at every roll and at `close`, and
`LogLoader` restores it from there.

Files: the segments, log end offset and flushed offset are a `LocalLog`'s.

I/O errors: a failed append, roll or fsync takes the log directory offline
(`LogDirFailureChannel`, shared by every log of a `LogManager`) and the error is
raised; later calls raise `KafkaStorageError` (KAFKA_STORAGE_ERROR), the high
watermark stays where the last good flush left it, and `close` leaves the
directory to be recovered at the next start.

Concurrency: all methods may be called from any thread; a per-log lock
serialises them. Operations that delete segment files (retention, truncation,
close) also take `segments_lock`, which compaction holds while it reads, so
compaction may run in a worker thread. The server appends and reads from its asyncio loop thread and
runs `flush()` (through `LogManager.flush_dirty()`) in a thread pool: the fsync
itself runs outside the lock, so appends continue while a flush is in progress.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from streams.broker.errors import InvalidTxnStateError, MessageTooLargeError, OffsetOutOfRangeError
from streams.broker.storage.batch import BatchHeader, build_control_batch, validate_batches
from streams.broker.storage.config import LogConfig
from streams.broker.storage.file_records import FileRecords, Slice
from streams.broker.storage.files import LOG_START_OFFSET_FILE, write_atomically
from streams.broker.storage.index import AbortedTxn
from streams.broker.storage.loader import LogLoader, producer_state_at
from streams.broker.storage.local_log import LocalLog
from streams.broker.storage.log_dir import LogDirFailureChannel
from streams.broker.storage.log_segments import LogSegments
from streams.broker.storage.producer_state import (
    PartitionProducers,
    delete_snapshots,
    write_snapshot,
)
from streams.broker.storage.records import is_abort_marker
from streams.broker.storage.retention import expired_prefix
from streams.broker.storage.segment import LogSegment

logger = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """Result of `PartitionLog.append`: the offsets given to the batches."""

    base_offset: int
    last_offset: int
    max_timestamp: int
    batches: list[BatchHeader] = field(repr=False)
    log_append_time_ms: int = -1  # the time set on the batches, or -1 (CreateTime)
    log_start_offset: int = 0


class PartitionLog:
    """The segments of one partition directory; see the module docstring."""

    def __init__(
        self,
        directory: Path | str,
        *,
        config: LogConfig | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        name: str | None = None,
        failures: LogDirFailureChannel | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.name = name or self.directory.name
        self._config = config or LogConfig()
        self._clock = clock
        self._lock = threading.RLock()
        # Held by whoever removes segment files (retention, truncation, close) and by
        # the cleaner for a whole compaction, which reads segments without `_lock`.
        self._segments_lock = threading.RLock()
        loaded = LogLoader(self.directory, self._config, now_ms=clock()).load()
        self._producers = loaded.producers
        self._segments = LogSegments(
            self.directory, loaded.segments, name=self.name, on_roll=self._snapshot_at_roll
        )
        self._log_start_offset = loaded.log_start_offset
        self._local = LocalLog(
            self.directory,
            self._segments,
            next_offset=loaded.next_offset,
            name=self.name,
            now_ms=clock(),
            failures=failures or LogDirFailureChannel(),
        )
        self.recovered_bytes = loaded.truncated_bytes
        logger.info(
            "Log %s: loaded %d segment(s), offsets [%d, %d)%s",
            self.name,
            len(self._segments),
            self._log_start_offset,
            self._local.next_offset,
            "" if loaded.clean_shutdown else " after an unclean shutdown",
        )

    # -- properties ---------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        with self._lock:
            self._config = config
            self._segments.set_index_interval(config.index_interval_bytes)

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._local.next_offset

    @property
    def high_watermark(self) -> int:
        if self._config.durability == "sync":
            return self._local.flushed_offset
        return self._local.next_offset

    @property
    def flushed_offset(self) -> int:
        return self._local.flushed_offset

    @property
    def size_bytes(self) -> int:
        return self._segments.size_bytes

    @property
    def segments(self) -> list[LogSegment]:
        """A snapshot of the segments, oldest first (do not mutate them)."""
        with self._lock:
            return self._segments.snapshot()

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.active

    @property
    def dirty(self) -> bool:
        return self._local.dirty

    @property
    def producer_state(self) -> PartitionProducers:
        """This partition's producer state (read it from the appending thread only)."""
        return self._producers

    @property
    def offline(self) -> bool:
        """True once an I/O error took this log's directory offline."""
        return self._local.offline

    # -- append -------------------------------------------------------------------

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        timestamp_ms: int | None = None,
        log_append_time: bool = False,
    ) -> AppendInfo:
        """Validate the concatenated batches in `records`, assign offsets, write them.

        `timestamp_ms` is the append time (default: the clock), used for
        LogAppendTime and segment.ms. `records` is not modified nor copied: the
        new base offsets are written with the bytes in one `pwritev`. Raises
        `CorruptMessageError` (bad CRC/length/magic) or `MessageTooLargeError`.
        Never fsyncs. `AppendInfo.batches` are the headers as written.
        """
        headers = validate_batches(records)
        config = self._config
        for h in headers:
            if h.size > config.max_message_bytes:
                raise MessageTooLargeError(
                    f"Log `{self.name}`: record batch of {h.size} bytes is larger than "
                    f"max.message.bytes `{config.max_message_bytes}`; raise the topic's "
                    "max.message.bytes or send smaller batches."
                )
        now = self._clock() if timestamp_ms is None else timestamp_ms
        append_time = log_append_time or config.message_timestamp_type == "LogAppendTime"
        if append_time:
            max_ts = now
        else:
            max_ts = max(h.max_timestamp for h in headers)
        count = sum(h.last_offset_delta + 1 for h in headers)
        with self._lock:
            self._local.check_open()
            first = self._local.append(
                records,
                headers,
                count=count,
                now=now,
                config=self._config,
                log_append_time_ms=now if append_time else None,
            )
            self._update_producers(records, headers, first)
            log_start = self._log_start_offset
        return AppendInfo(
            base_offset=first,
            last_offset=first + count - 1,
            max_timestamp=max_ts,
            batches=headers,
            log_append_time_ms=now if append_time else -1,
            log_start_offset=log_start,
        )

    def append_control(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        timestamp_ms: int,
        *,
        coordinator_epoch: int = 0,
    ) -> int:
        """Write a transaction marker (commit or abort) and return its offset."""
        batch = build_control_batch(
            producer_id,
            producer_epoch,
            commit=commit,
            timestamp_ms=timestamp_ms,
            coordinator_epoch=coordinator_epoch,
        )
        return self.append(batch, timestamp_ms=timestamp_ms).base_offset

    def _update_producers(
        self, records: bytes | bytearray | memoryview, headers: list[BatchHeader], first: int
    ) -> None:
        """Producer state after an append at `first`; an abort marker's transaction goes to
        the active segment's transaction index now, before the lock is released."""
        offset = first
        for h in headers:
            if h.producer_id >= 0:
                abort = h.is_control and is_abort_marker(
                    bytes(records[h.position : h.position + h.size])
                )
                aborted = self._producers.update(h, offset, abort=abort)
                if aborted is not None:
                    self._index_aborted(aborted)
            offset += h.last_offset_delta + 1

    def _index_aborted(self, txn: AbortedTxn) -> None:
        try:
            self._segments.segment_for(txn.last_offset).txn_index.append(txn)
        except OSError as e:
            # the marker is in the log without its entry: only recovery may serve it now
            self._local.fail(f"transaction index entry for the marker at {txn.last_offset}", e)
            raise

    def _snapshot_at_roll(self, offset: int) -> None:
        """The producer state as of `offset`, where a new segment starts (under the lock)."""
        write_snapshot(self.directory, offset, self._producers, sync=False)

    def expire_producers(self, before_ms: int) -> int:
        """Forget producers idle since before `before_ms` (producer.id.expiration.ms)."""
        with self._lock:
            return self._producers.expire(before_ms)

    def record_aborted(
        self,
        producer_id: int,
        first_offset: int,
        last_offset: int,
        *,
        last_stable_offset: int | None = None,
    ) -> None:
        """Index an aborted transaction: its data spans [first_offset, last_offset] where
        `last_offset` is the offset of its abort marker (from `append_control`). An abort
        marker of a transaction the producer state knows is indexed by the append
        itself; the same entry is not added twice."""
        if first_offset > last_offset:
            raise InvalidTxnStateError(
                f"Log `{self.name}`: aborted transaction of producer `{producer_id}` has "
                f"first offset `{first_offset}` after its marker `{last_offset}`."
            )
        with self._lock:
            seg = self._segments.segment_for(last_offset)
            if any(
                (t.producer_id, t.first_offset, t.last_offset)
                == (producer_id, first_offset, last_offset)
                for t in seg.txn_index.entries
            ):
                return
            lso = last_offset + 1 if last_stable_offset is None else last_stable_offset
            seg.txn_index.append(AbortedTxn(producer_id, first_offset, last_offset, lso))

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[tuple[int, int]]:
        """`(producer_id, first_offset)` of aborted transactions overlapping
        [start_offset, end_offset): what a read_committed fetch must be told."""
        with self._lock:
            return self._segments.aborted_transactions(start_offset, end_offset)

    def roll(self) -> int:
        """Start a new segment at the log end offset (if the active one is not empty)."""
        with self._lock:
            self._local.check_open()
            if self._segments.active.size:
                try:
                    self._local.roll(
                        self._clock(), index_interval_bytes=self._config.index_interval_bytes
                    )
                except OSError as e:
                    self._local.fail(f"roll at offset {self._local.next_offset}", e)
                    raise
            return self._segments.active.base_offset

    # -- read ---------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> bytes:
        """Whole batches from the one holding `offset`, up to `max_bytes` (see `_slice_segments`).

        The first batch is returned even if larger and may start before `offset`
        (as in Kafka: the client skips); batches at or past `max_offset` (high
        watermark or last stable offset) are left out. Raises `OffsetOutOfRangeError`
        outside [log_start_offset, log_end_offset]; later segments fill the budget.
        """
        with self._lock:
            return b"".join(
                s.read_at(a, b - a)
                for s, a, b in self._slice_segments(offset, max_bytes, max_offset)
            )

    def read_records(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one: bool = True,
    ) -> FileRecords:
        """What `read` returns, as file ranges for a zero-copy send; close it once sent.

        With `min_one=False` a first batch larger than `max_bytes` is not returned
        either (Kafka's `minOneMessage`: only a fetch's first partition with data
        may exceed the limits)."""
        with self._lock:
            return FileRecords.of(
                self._slice_segments(offset, max_bytes, max_offset, min_one=min_one)
            )

    def _slice_segments(
        self, offset: int, max_bytes: int, max_offset: int | None, *, min_one: bool = True
    ) -> list[Slice]:
        """Ranges of whole batches from the one holding `offset`, below `max_offset`
        (see `LocalLog.slices`). Raises `OffsetOutOfRangeError` outside
        [log_start_offset, log_end_offset]. Call with the lock held.
        """
        self._local.check_open()
        end = self._local.next_offset
        limit = end if max_offset is None else min(max_offset, end)
        if offset < self._log_start_offset or offset > end:
            raise OffsetOutOfRangeError(
                f"Log `{self.name}`: offset `{offset}` is outside the log's range "
                f"[{self._log_start_offset}, {end}]; reset to the start or end.",
            )
        return self._local.slices(offset, max_bytes, limit, min_one=min_one)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """The first offset whose record timestamp is >= `timestamp_ms`, with that
        timestamp; None when every record is older (ListOffsets by time). Records are
        decoded for the one batch that matters; when its codec is not available the
        batch's base offset and max timestamp are returned."""
        with self._lock:
            self._local.check_open()
            return self._segments.offset_for_timestamp(timestamp_ms, self._log_start_offset)

    # -- flush --------------------------------------------------------------------

    def flush(self) -> None:
        """fsync everything appended so far; safe to run in a thread pool.

        The fsync runs outside the lock; the flushed offset (and so the high
        watermark under durability=sync) advances to what was appended when the
        flush started. A failed fsync raises its `OSError` after taking the log
        dir offline, and the flushed offset stays; on an offline log, raises
        `KafkaStorageError`.
        """
        with self._lock:
            if self._local.closed:
                return
            self._local.check_open()
            end, todo = self._local.begin_flush(self._clock())
        self._local.fsync(todo, end)
        with self._lock:
            self._local.end_flush(end)

    def flush_due(self, now_ms: int) -> bool:
        """Whether flush.messages / flush.ms ask for a flush now (never for an offline log)."""
        return not self._local.offline and self._local.flush_due(now_ms, self._config)

    # -- truncation and deletion ----------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset to `offset` (DeleteRecords); whole segments below
        it are deleted. Returns the new log start offset."""
        with self._segments_lock, self._lock:
            self._local.check_open()
            if offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"Log `{self.name}`: cannot delete records before `{offset}`: it is past "
                    f"the high watermark `{self.high_watermark}`."
                )
            if offset <= self._log_start_offset:
                return self._log_start_offset
            self._log_start_offset = offset
            write_atomically(self.directory / LOG_START_OFFSET_FILE, str(offset).encode())
            self._segments.delete_below(offset)  # whole segments only; keeps the active one
            self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
            delete_snapshots(self.directory, below=self._segments[0].base_offset)
            return self._log_start_offset

    def truncate_to(self, offset: int) -> int:
        """Remove batches at and after `offset` (whole batches); returns the new end offset."""
        with self._segments_lock, self._lock:
            self._local.check_open()
            if offset >= self._local.next_offset:
                return self._local.next_offset
            end = self._local.truncate_to(
                offset, self._clock(), index_interval_bytes=self._config.index_interval_bytes
            )
            self._log_start_offset = min(self._log_start_offset, end)
            # the state of the producers must forget what was cut (Kafka's truncateAndReload)
            delete_snapshots(self.directory, above=end)
            self._producers = producer_state_at(
                self.directory, self._segments.snapshot(), end, name=self.name
            )
            logger.warning("Log %s: truncated to offset %d", self.name, end)
            return end

    def delete_old_segments(self, now_ms: int) -> int:
        """Retention: delete whole segments past retention.ms / retention.bytes.

        Only segments below the high watermark go; if every segment has expired
        the active one is rolled first (Kafka does the same). Returns how many
        segments were deleted.
        """
        with self._segments_lock, self._lock:
            self._local.check_open()
            c = self._config
            if not c.delete:
                return 0
            segments = self._segments.snapshot()
            deletable = expired_prefix(segments, self._config, now_ms, self.high_watermark)
            if deletable == len(segments) and self._segments.active.size:
                self._local.roll(now_ms, index_interval_bytes=c.index_interval_bytes)
            deleted = self._segments.delete_first(deletable, reason="retention deleted")
            if deleted:
                self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
                delete_snapshots(self.directory, below=self._segments[0].base_offset)
            return deleted

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> None:
        """Swap `old` (consecutive segments) for `new` (used by the cleaner, under its protocol)."""
        with self._lock:
            self._segments.replace(old, new)

    # -- lifecycle ------------------------------------------------------------------

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    @property
    def segments_lock(self) -> threading.RLock:
        """Hold it to read segment files outside `lock` (see cleaner.py)."""
        return self._segments_lock

    def close(self) -> None:
        """Snapshot the producer state at the log end, flush, close the files and mark the
        shutdown clean (the next open neither scans the active segment nor replays)."""
        with self._segments_lock, self._lock:
            if self._local.closed:
                return
            if not self._local.offline:
                try:
                    write_snapshot(
                        self.directory, self._local.next_offset, self._producers, sync=True
                    )
                except OSError as e:
                    self._local.fail("producer state snapshot at close", e)
            self._local.close()

    def delete(self) -> None:
        """Close without a clean-shutdown marker and remove every segment file."""
        with self._segments_lock, self._lock:
            self._local.delete()
