"""`LogLoader`: opens a partition directory and recovers it. It only loads; it never appends.

On open:
1. finish or roll back a compaction that was interrupted (`cleaner.py` protocol)
   and remove temporary files;
2. open every `<base>.log` in offset order, dropping index files without a log;
3. for every segment but the last, load its indexes and sanity-check them
   (monotonic, inside the file, the last entry points at a batch with that
   offset); an index that fails is rebuilt by scanning the segment. The bytes
   after the last index entry are always scanned with CRC checks, so a torn tail
   in an older segment (power loss before the roll was flushed) is found too:
   the segment is truncated there and every later segment deleted;
4. the last (active) segment is scanned fully after an unclean shutdown
   (no `.clean-shutdown` marker): a torn tail (short batch, bad CRC, garbage) is
   truncated at the last valid batch, and its indexes are rebuilt, the
   transaction index included: starting from the producer state as of the
   segment's base offset, every abort marker in it gets its entry again, so a
   crash between a marker and its index entry cannot expose the aborted records
   to read_committed readers;
5. the log start offset is the larger of the first segment's base offset and
   the persisted `log-start-offset`;
6. the producer state as of the log end: the latest readable `<offset>.snapshot`
   not past the point needed (written at every roll and at a clean shutdown)
   plus the batch headers after it (`producer_state_at`), so a restart reads at
   most the segments written since the last roll, never the whole partition;
   snapshots past the log end (of data that was cut) are removed.

Kafka does the same in `LogLoader` / `LogSegment.recover` /
`UnifiedLog.rebuildProducerState`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from streams.broker.storage.config import LogConfig
from streams.broker.storage.files import (
    CLEAN_SHUTDOWN_FILE,
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIXES,
    LOG_START_OFFSET_FILE,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    base_offset_of,
    filename_prefix,
    segment_file,
)
from streams.broker.storage.producer_state import (
    PartitionProducers,
    delete_snapshots,
    read_snapshot,
    snapshot_offsets,
)
from streams.broker.storage.records import is_abort_marker
from streams.broker.storage.segment import LogSegment

logger = logging.getLogger(__name__)


@dataclass
class LoadedLog:
    """What `LogLoader.load()` found: segments in offset order (never empty)."""

    segments: list[LogSegment]
    log_start_offset: int
    next_offset: int
    clean_shutdown: bool
    truncated_bytes: int
    producers: PartitionProducers


class LogLoader:
    """Loads and recovers the segments of one partition directory."""

    def __init__(self, directory: Path, config: LogConfig, *, now_ms: int) -> None:
        self.directory = Path(directory)
        self.config = config
        self.now_ms = now_ms
        self._cut: set[int] = set()

    def load(self) -> LoadedLog:
        d = self.directory
        d.mkdir(parents=True, exist_ok=True)
        marker = d / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self._finish_interrupted_compaction()
        bases = self._segment_bases()
        segments: list[LogSegment] = []
        truncated = 0
        producers: PartitionProducers | None = None
        for i, base in enumerate(bases):
            seg = self._open(base)
            last = i == len(bases) - 1
            if last and not clean:
                # Only appends write the active segment, so its offsets have no gaps
                # unless the topic is compacted (truncation can expose a cleaned segment).
                producers = producer_state_at(d, segments, seg.base_offset, name=d.name)
                truncated += self._recover(
                    seg, contiguous=not self.config.compact, producers=producers
                )
            else:
                truncated += self._load_checked(seg)
            if segments and seg.base_offset < segments[-1].next_offset:
                logger.warning(
                    "Log %s: segment %d overlaps the previous one (ends at %d); rebuilding",
                    d,
                    seg.base_offset,
                    segments[-1].next_offset,
                )
                segments[-1].truncate_to(seg.base_offset)
            segments.append(seg)
            if truncated and not last and self._was_cut(seg):
                for later in bases[i + 1 :]:
                    logger.warning(
                        "Log %s: deleting segment %d after a torn segment ending at %d",
                        d,
                        later,
                        seg.next_offset,
                    )
                    self._open(later).delete()
                break
        if not segments:
            start = self._read_log_start() or 0
            segments.append(self._open(start))
        active = segments[-1]
        first_batch = next(active.scan_headers(0), None)
        active.created_ms = (
            first_batch.max_timestamp
            if first_batch and first_batch.max_timestamp >= 0
            else self.now_ms
        )
        next_offset = active.next_offset
        log_start = max(segments[0].base_offset, min(self._read_log_start() or 0, next_offset))
        for offset in delete_snapshots(d, above=next_offset):
            logger.info("Log %s: removed producer snapshot at %d, past the log end", d, offset)
        if producers is None:
            producers = producer_state_at(d, segments, next_offset, name=d.name)
        if clean:
            marker.unlink()
        return LoadedLog(segments, log_start, next_offset, clean, truncated, producers)

    # -- helpers -------------------------------------------------------------------

    def _open(self, base: int) -> LogSegment:
        return LogSegment(
            self.directory, base, index_interval_bytes=self.config.index_interval_bytes
        )

    def _was_cut(self, seg: LogSegment) -> bool:
        return seg.base_offset in self._cut

    def _segment_bases(self) -> list[int]:
        logs: set[int] = set()
        others: list[Path] = []
        for entry in os.scandir(self.directory):
            name = entry.name
            if name.endswith(".tmp"):
                os.unlink(entry.path)
                continue
            base = base_offset_of(name)
            if base is None:
                continue
            suffix = name[name.index(".") :]
            if suffix == LOG_SUFFIX:
                logs.add(base)
            elif suffix in INDEX_SUFFIXES:
                others.append(Path(entry.path))
        for path in others:
            if base_offset_of(path.name) not in logs:
                logger.info(
                    "Log %s: removing index %s without a log file", self.directory, path.name
                )
                path.unlink()
        return sorted(logs)

    def _load_checked(self, seg: LogSegment) -> int:
        """Load indexes, rebuild them if inconsistent, and CRC-scan past the last entry."""
        if not seg.txn_index.load():
            logger.warning(
                "Log %s: transaction index %s has a partial entry; keeping whole entries",
                self.directory,
                seg.txn_index.path.name,
            )
            seg.txn_index.truncate_to(2**63 - 1)
        ok = (
            seg.size > 0
            and seg.offset_index.load(seg.size)
            and len(seg.offset_index) > 0
            and self._last_entry_matches(seg)
            and seg.time_index.load(2**63 - 1)
        )
        if not ok:
            if len(seg.offset_index) or seg.size > 2 * seg.index_interval_bytes + (1 << 20):
                logger.warning(
                    "Log %s: index of segment %d is missing or inconsistent; rebuilding",
                    self.directory,
                    seg.base_offset,
                )
            return self._recover(seg)
        start = seg.offset_index.positions[-1]
        next_offset = seg.offset_index.offsets[-1]
        max_ts, max_off = (
            (seg.time_index.timestamps[-1], seg.time_index.offsets[-1])
            if len(seg.time_index)
            else (-1, seg.base_offset)
        )
        for h in seg.iter_valid(start):
            next_offset = h.base_offset + h.last_offset_delta + 1
            if h.max_timestamp > max_ts:
                max_ts, max_off = h.max_timestamp, h.base_offset
        if len(seg.time_index) and seg.time_index.offsets[-1] >= next_offset:
            logger.warning(
                "Log %s: time index of segment %d points past its end; rebuilding",
                self.directory,
                seg.base_offset,
            )
            return self._recover(seg)
        seg.next_offset = next_offset
        seg.max_timestamp, seg.offset_of_max_timestamp = max_ts, max_off
        cut = seg.size - seg.valid_end
        if cut:
            logger.warning(
                "Log %s: segment %d has a torn tail of %d bytes at byte %d; truncating",
                self.directory,
                seg.base_offset,
                cut,
                seg.valid_end,
            )
            seg.truncate_bytes(seg.valid_end)
            seg.offset_index.truncate_to(next_offset)
            seg.time_index.truncate_to(next_offset)
            seg.txn_index.truncate_to(next_offset)
            self._cut.add(seg.base_offset)
        seg._bytes_since_index = seg.size - start
        return cut

    def _recover(
        self,
        seg: LogSegment,
        *,
        contiguous: bool = False,
        producers: PartitionProducers | None = None,
    ) -> int:
        cut = seg.recover(contiguous=contiguous, producers=producers)
        if cut:
            self._cut.add(seg.base_offset)
        return cut

    @staticmethod
    def _last_entry_matches(seg: LogSegment) -> bool:
        h = seg.header_at(seg.offset_index.positions[-1])
        return h is not None and h.base_offset == seg.offset_index.offsets[-1]

    def _read_log_start(self) -> int | None:
        path = self.directory / LOG_START_OFFSET_FILE
        try:
            return int(path.read_text().strip())
        except FileNotFoundError:
            return None
        except ValueError:
            logger.warning(
                "Log %s: unreadable %s; using the first segment's base offset",
                self.directory,
                path.name,
            )
            return None

    def _finish_interrupted_compaction(self) -> None:
        """Complete or undo a segment swap interrupted by a crash (see cleaner.py)."""
        d = self.directory
        cleaned = sorted(p for p in d.iterdir() if p.name.endswith(LOG_SUFFIX + CLEANED_SUFFIX))
        deleted = sorted(p for p in d.iterdir() if p.name.endswith(DELETED_SUFFIX))
        for path in cleaned:
            base = base_offset_of(path.name)
            assert base is not None
            committed = segment_file(d, base, LOG_SUFFIX + DELETED_SUFFIX).exists()
            if committed:
                logger.warning("Log %s: completing the compaction of segment %d", d, base)
                for suffix in INDEX_SUFFIXES:
                    segment_file(d, base, suffix).unlink(missing_ok=True)
                os.replace(path, segment_file(d, base, LOG_SUFFIX))
            else:
                logger.warning(
                    "Log %s: rolling back an unfinished compaction of segment %d", d, base
                )
                for old in deleted:
                    os.replace(old, old.with_name(old.name[: -len(DELETED_SUFFIX)]))
                deleted = []
                path.unlink()
        for old in deleted:
            old.unlink(missing_ok=True)


def replay_producer_state(
    segments: list[LogSegment], state: PartitionProducers, start: int, end: int
) -> int:
    """Apply the batch headers of [start, end) to `state`; returns batches read."""
    n = 0
    for seg in segments:
        if seg.next_offset <= start:
            continue
        if seg.base_offset >= end:
            break
        for h in seg.scan_headers(0):
            if h.last_offset < start:
                continue
            if h.base_offset >= end:
                break
            n += 1
            if h.producer_id >= 0:
                abort = h.is_control and is_abort_marker(seg.read_at(h.position, h.size))
                state.update(h, h.base_offset, abort=abort)
    return n


def producer_state_at(
    directory: Path, segments: list[LogSegment], offset: int, *, name: str
) -> PartitionProducers:
    """The producer state as of `offset`: the latest readable snapshot at or before it,
    then the headers of `segments` from there (Kafka's `rebuildProducerState`)."""
    state, start, source = None, segments[0].base_offset if segments else offset, "the log start"
    for snap in reversed([o for o in snapshot_offsets(directory) if o <= offset]):
        state = read_snapshot(directory, snap)
        if state is not None:
            start, source = max(snap, start), filename_prefix(snap) + SNAPSHOT_SUFFIX
            break
    if state is None:
        state = PartitionProducers()
    batches = replay_producer_state(segments, state, start, offset)
    if state.entries:
        logger.info(
            "Log %s: producer state as of offset %d from %s, %d batch(es) replayed from "
            "offset %d: %d producer(s), open transactions from %s",
            name,
            offset,
            source,
            batches,
            start,
            len(state.entries),
            state.first_unstable_offset(),
        )
    return state
