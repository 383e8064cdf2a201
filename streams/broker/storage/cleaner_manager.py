"""`LogCleanerManager`: which compacted logs need cleaning, and where each one is clean up to.

Kafka's `LogCleanerManager`. Per partition it keeps the cleaner checkpoint, the
first offset not yet cleaned, in `<data dir>/cleaner-offset-checkpoint` (Kafka's
file and format: a version line `0`, a count line, then `topic partition offset`
per line). A log is cleaned only when its dirty ratio, the bytes of segments
from the checkpoint to the first uncleanable offset over the bytes of all
cleanable segments, is above its `min.cleanable.dirty.ratio` (Kafka's default
0.5), or when a tombstone a pass kept has since passed `delete.retention.ms`
(remembered in memory from that pass). Deciding reads nothing but the segment
list, so a compacted topic that gets no writes costs no work however often the
cleaner looks; a pass reads the log once and holds one batch and an
`OffsetMap` of at most `log.cleaner.dedupe.buffer.size` bytes.

Concurrency contract: thread-safe. `clean_due` runs in the compaction worker
thread (one at a time); `forget` comes from the loop thread when a topic is
deleted or created.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from streams.broker.storage.cleaner import clean_log, first_uncleanable_offset
from streams.broker.storage.files import write_atomically
from streams.broker.storage.log import PartitionLog

logger = logging.getLogger(__name__)

__all__ = ["CLEANER_CHECKPOINT_FILE", "LogCleanerManager"]

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
_VERSION = 0


class LogCleanerManager:
    """Cleaner checkpoints of one data dir, and the choice of what to clean."""

    def __init__(self, data_dir: Path, *, dedupe_buffer_bytes: int) -> None:
        self.path = Path(data_dir) / CLEANER_CHECKPOINT_FILE
        self.dedupe_buffer_bytes = dedupe_buffer_bytes
        self._lock = threading.Lock()
        self._checkpoints = self._read()
        self._tombstone_expiry: dict[tuple[str, int], int] = {}

    # -- the checkpoint file ------------------------------------------------------------

    def _read(self) -> dict[tuple[str, int], int]:
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return {}
        try:
            if int(lines[0]) != _VERSION or int(lines[1]) != len(lines) - 2:
                raise ValueError("version or count line does not match")
            out = {}
            for line in lines[2:]:
                topic, partition, offset = line.rsplit(" ", 2)
                out[(topic, int(partition))] = int(offset)
            return out
        except (ValueError, IndexError) as e:
            # only costs work: every log is cleaned from its start once more
            logger.warning("Ignoring unreadable cleaner checkpoint %s: %s", self.path, e)
            return {}

    def _write(self) -> None:
        entries = sorted(self._checkpoints.items())
        text = f"{_VERSION}\n{len(entries)}\n" + "".join(
            f"{topic} {partition} {offset}\n" for (topic, partition), offset in entries
        )
        write_atomically(self.path, text.encode())

    def checkpoint(self, topic: str, partition: int) -> int | None:
        with self._lock:
            return self._checkpoints.get((topic, partition))

    def forget(self, topic: str) -> None:
        """Drop the checkpoints of `topic` (deleted, or created anew)."""
        with self._lock:
            gone = [key for key in self._checkpoints if key[0] == topic]
            for key in gone:
                del self._checkpoints[key]
            for key in [k for k in self._tombstone_expiry if k[0] == topic]:
                del self._tombstone_expiry[key]
            if gone:
                self._write()

    # -- choosing and cleaning ----------------------------------------------------------------

    def dirty_ratio(self, topic: str, partition: int, log: PartitionLog, now_ms: int) -> float:
        """Dirty bytes over cleanable bytes (Kafka's `LogToClean.cleanableRatio`)."""
        segments = log.segments
        uncleanable = first_uncleanable_offset(log, segments, now_ms)
        first_dirty = self._first_dirty(topic, partition, log)
        clean = dirty = 0
        for seg in segments[:-1]:
            if seg.base_offset >= uncleanable:
                break
            # Kafka's cleanable range [first dirty, first uncleanable): empty when a pass
            # already got as far as it may (say, up to a transaction still open)
            if first_dirty < uncleanable and seg.next_offset > first_dirty:
                dirty += seg.size
            else:
                clean += seg.size
        total = clean + dirty
        return dirty / total if total else 0.0

    def _first_dirty(self, topic: str, partition: int, log: PartitionLog) -> int:
        offset = self.checkpoint(topic, partition)
        start, end = log.log_start_offset, log.log_end_offset
        if offset is None or offset < start:
            return start
        # beyond the end: the log was truncated or recreated since; clean it all again
        return offset if offset <= end else start

    def clean_due(self, logs: list[tuple[str, int, PartitionLog]], now_ms: int) -> int:
        """Clean every compacted log whose dirty ratio (or an expired tombstone) asks for
        it; returns how many segments were rewritten."""
        rewritten = 0
        for topic, partition, log in logs:
            if not log.config.compact or log.offline:
                continue
            ratio = self.dirty_ratio(topic, partition, log, now_ms)
            expiry = self._tombstone_expiry.get((topic, partition))
            tombstones_due = expiry is not None and expiry <= now_ms
            if ratio <= log.config.min_cleanable_dirty_ratio and not tombstones_due:
                continue
            first_dirty = self._first_dirty(topic, partition, log)
            stats = clean_log(
                log,
                now_ms,
                first_dirty_offset=first_dirty,
                dedupe_buffer_bytes=self.dedupe_buffer_bytes,
            )
            rewritten += stats.segments_rewritten
            logger.info(
                "Log %s: cleaned offsets [%d, %d) (dirty ratio %.2f%s): read %d segment(s), "
                "%d bytes; rewrote %d segment(s)",
                log.name,
                first_dirty,
                stats.end_offset,
                ratio,
                ", tombstones expired" if tombstones_due else "",
                stats.segments_read,
                stats.bytes_read,
                stats.segments_rewritten,
            )
            with self._lock:
                if stats.next_tombstone_expiry_ms is None:
                    self._tombstone_expiry.pop((topic, partition), None)
                else:
                    self._tombstone_expiry[(topic, partition)] = stats.next_tombstone_expiry_ms
                if self._checkpoints.get((topic, partition)) != stats.end_offset:
                    self._checkpoints[(topic, partition)] = stats.end_offset
                    self._write()
        return rewritten
