"""Log compaction for `cleanup.policy=compact` (Kafka's `LogCleaner`, simplified).

`clean_log(log, now_ms, first_dirty_offset=..., dedupe_buffer_bytes=...)` does
one cleaning pass, as Kafka's `Cleaner.doClean`: the dirty range runs from
`first_dirty_offset` (the cleaner checkpoint, see `cleaner_manager.py`) to the
first uncleanable offset (the active segment, the first segment past the high
watermark or younger than `min.compaction.lag.ms`, the first batch of a
transaction still open). An `OffsetMap` of the dirty range's keys (bounded by
`log.cleaner.dedupe.buffer.size`; when it fills, the pass stops there) decides,
for every segment from the log start to the end of the pass, which records
stay: those whose key has no later offset in the map. Tombstones (null value)
in the cleaned range go once their batch's max timestamp is older than
`delete.retention.ms`. Offsets never change: a batch that loses records is
re-encoded uncompressed with the same base offset and `lastOffsetDelta`, and
its surviving records are copied byte for byte (their deltas stay valid).
Segments are read one batch at a time and written out as they are cleaned, so a
pass holds one batch and the map, not a segment. `compact_log(log, now_ms)` is
a pass from the log start with no checkpoint (tests, one-off calls).

Transactions: markers found anywhere in the log decide each transactional
batch: data of aborted transactions is dropped, data of committed ones is
compacted like any other. Control batches are kept. Batches compressed with a
codec this Python cannot read are kept whole and shadow nothing.

Crash safety: the new segment is written as `<base>.log.cleaned` and fsynced;
then the old segments of the group are renamed to `.log.deleted` (last one
first), the cleaned file renamed to `<base>.log`, and the `.deleted` files
removed. `LogLoader` completes the swap if `<base>.log.deleted` exists (every
old segment was renamed) and rolls it back otherwise.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from streams.broker.errors import CorruptMessageError, UnsupportedCompressionTypeError
from streams.broker.storage.batch import (
    COMPRESSION_MASK,
    CONTROL_COMMIT,
    BatchHeader,
    encode_batch,
)
from streams.broker.storage.files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    fsync_dir,
    segment_file,
)
from streams.broker.storage.log import PartitionLog
from streams.broker.storage.offset_map import OffsetMap
from streams.broker.storage.records import Record, decode_records
from streams.broker.storage.segment import LogSegment

logger = logging.getLogger(__name__)

__all__ = ["CleanerStats", "clean_log", "compact_log", "first_uncleanable_offset"]

_Decisions = dict[int, tuple[list[int], list[bool]]]
#: `compact_log`'s map budget when no broker config gives one (Kafka's default buffer)
DEFAULT_DEDUPE_BUFFER_BYTES = 128 * 1024 * 1024


@dataclass
class CleanerStats:
    """What one pass did: the work (`segments_read`, `bytes_read`: record data decoded),
    the outcome, and the pass's end offset, which becomes the cleaner checkpoint."""

    end_offset: int
    segments_read: int = 0
    bytes_read: int = 0
    segments_rewritten: int = 0
    #: the earliest time a tombstone kept by this pass may be removed (None: none kept)
    next_tombstone_expiry_ms: int | None = None


def compact_log(log: PartitionLog, now_ms: int) -> int:
    """One pass over every cleanable segment from the log start; returns how many
    segments were rewritten."""
    stats = clean_log(
        log,
        now_ms,
        first_dirty_offset=log.log_start_offset,
        dedupe_buffer_bytes=DEFAULT_DEDUPE_BUFFER_BYTES,
    )
    return stats.segments_rewritten


def clean_log(
    log: PartitionLog, now_ms: int, *, first_dirty_offset: int, dedupe_buffer_bytes: int
) -> CleanerStats:
    """One cleaning pass of `log` (see the module docstring).

    Appends and reads continue meanwhile (the log's lock is only taken for each
    swap); retention and truncation of this log wait for the end.
    """
    with log.segments_lock:
        return _clean(log, now_ms, first_dirty_offset, dedupe_buffer_bytes)


def first_uncleanable_offset(log: PartitionLog, segments: list[LogSegment], now_ms: int) -> int:
    """Where cleaning must stop, from what is known without reading (Kafka's
    `LogCleanerManager.cleanableOffsets`): the active segment, the first segment with
    data past the high watermark, the first younger than `min.compaction.lag.ms`, the
    first offset of a transaction still open."""
    hw = log.high_watermark
    horizon = now_ms - log.config.min_compaction_lag_ms
    with log.lock:  # the producer state changes under it, in the appending thread
        unstable = log.producer_state.first_unstable_offset()
    limit = (
        segments[-1].base_offset if unstable is None else min(unstable, segments[-1].base_offset)
    )
    for seg in segments[:-1]:
        if seg.base_offset >= limit:
            break
        if seg.next_offset > hw or seg.max_timestamp > horizon:
            return seg.base_offset
    return limit


def _clean(log: PartitionLog, now_ms: int, first_dirty: int, buffer_bytes: int) -> CleanerStats:
    config = log.config
    segments = log.segments
    uncleanable = first_uncleanable_offset(log, segments, now_ms)
    first_dirty = max(first_dirty, segments[0].base_offset)
    stats = CleanerStats(end_offset=first_dirty)
    cleanable = [seg for seg in segments[:-1] if seg.base_offset < uncleanable]
    dirty = [seg for seg in cleanable if seg.next_offset > first_dirty]
    if not cleanable or (not dirty and first_dirty <= cleanable[0].base_offset):
        return stats
    decisions = _transaction_decisions(segments)
    offset_map: OffsetMap | None
    if dirty:
        offset_map, end = _build_offset_map(
            dirty, first_dirty, uncleanable, decisions, buffer_bytes
        )
    else:  # nothing new: a pass only for tombstones of the clean part that expired
        offset_map, end = OffsetMap(1), first_dirty
    if end <= first_dirty and dirty:
        if offset_map is not None:  # not even one batch fits the configured buffer
            logger.error(
                "Log %s: cannot clean from offset %d: the batch there has more keys than "
                "log.cleaner.dedupe.buffer.size `%d` holds; raise it",
                log.name,
                first_dirty,
                buffer_bytes,
            )
        return stats
    assert offset_map is not None
    stats.end_offset = max(end, first_dirty)
    delete_horizon = now_ms - config.delete_retention_ms
    for group in _groups([seg for seg in cleanable if seg.base_offset < end], config.segment_bytes):
        if _clean_group(log, group, offset_map, decisions, delete_horizon, end, stats):
            stats.segments_rewritten += len(group)
    if stats.next_tombstone_expiry_ms is not None:
        stats.next_tombstone_expiry_ms += config.delete_retention_ms
    return stats


def _groups(segments: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    groups: list[list[LogSegment]] = []
    size = 0
    for seg in segments:
        if groups and size + seg.size <= max_bytes:
            groups[-1].append(seg)
            size += seg.size
        else:
            groups.append([seg])
            size = seg.size
    return groups


def _transaction_decisions(segments: list[LogSegment]) -> _Decisions:
    """producer id -> (marker offsets, committed?) in offset order."""
    out: _Decisions = defaultdict(lambda: ([], []))
    for seg in segments:
        for h in seg.scan_headers(0):
            if not h.is_control:
                continue
            try:
                record = decode_records(seg.read_at(h.position, h.size))[0]
                kind = struct.unpack(">hh", record.key or b"\0\0\xff\xff")[1]
            except (CorruptMessageError, IndexError, struct.error):
                continue
            offsets, commits = out[h.producer_id]
            offsets.append(h.base_offset)
            commits.append(kind == CONTROL_COMMIT)
    return out


def _outcome(h: BatchHeader, decisions: _Decisions) -> bool | None:
    """True committed, False aborted, None undecided (for a transactional batch)."""
    entry = decisions.get(h.producer_id)
    if entry is None:
        return None
    offsets, commits = entry
    i = bisect.bisect_right(offsets, h.last_offset)
    return commits[i] if i < len(offsets) else None


def _pass_end(
    dirty: list[LogSegment], first_dirty: int, uncleanable: int, decisions: _Decisions
) -> tuple[int, int]:
    """Headers only: where the pass must stop (the first uncleanable offset, or the
    first batch of a transaction not decided yet: Kafka does not clean past the first
    unstable offset), and how many records with keys it can meet before that."""
    end, keys = uncleanable, 0
    for seg in dirty:
        for h in seg.scan_headers(0):
            if h.base_offset >= end:
                return end, keys
            if h.last_offset < first_dirty or h.is_control:
                continue
            if h.is_transactional and _outcome(h, decisions) is None:
                return h.base_offset, keys
            keys += h.records_count
    return end, keys


def _build_offset_map(
    dirty: list[LogSegment],
    first_dirty: int,
    uncleanable: int,
    decisions: _Decisions,
    buffer_bytes: int,
) -> tuple[OffsetMap | None, int]:
    """The keys of [first_dirty, end) with their last offsets, and `end`: `_pass_end`,
    or the batch where the map filled up."""
    end, keys = _pass_end(dirty, first_dirty, uncleanable, decisions)
    if end <= first_dirty:
        return None, end
    offset_map = OffsetMap(OffsetMap.slots_for(keys, buffer_bytes))
    for seg in dirty:
        for h in seg.scan_headers(0):
            if h.base_offset >= end:
                return offset_map, end
            skip = h.is_control or (h.is_transactional and _outcome(h, decisions) is False)
            if h.last_offset < first_dirty or skip:
                continue
            if not offset_map.room(h.records_count):
                return offset_map, max(h.base_offset, first_dirty)
            try:
                records = decode_records(seg.read_at(h.position, h.size))
            except UnsupportedCompressionTypeError:
                continue
            for r in records:
                if r.key is not None and r.offset >= first_dirty:
                    offset_map.put(r.key, r.offset)
    return offset_map, end


def _clean_group(
    log: PartitionLog,
    group: list[LogSegment],
    offset_map: OffsetMap,
    decisions: _Decisions,
    delete_horizon: int,
    end: int,
    stats: CleanerStats,
) -> bool:
    """Write the cleaned batches of `group` to a `.cleaned` file, batch by batch, and
    swap it in; False (nothing swapped) when one segment would come out unchanged."""
    base = group[0].base_offset
    directory = log.directory
    changed = False
    cleaned = segment_file(directory, base, LOG_SUFFIX + CLEANED_SUFFIX)
    with open(cleaned, "wb") as f:
        for seg in group:
            stats.segments_read += 1
            for h in seg.scan_headers(0):
                data = seg.read_at(h.position, h.size)
                stats.bytes_read += len(data)
                kept = _clean_batch(h, data, offset_map, decisions, delete_horizon, end, stats)
                changed |= kept is not data
                if kept:
                    f.write(kept)
        if not changed and len(group) == 1:
            f.close()
            cleaned.unlink()
            return False  # nothing to drop and nothing to merge
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(directory)
    with log.lock:
        current = log.segments
        if not _still_there(current, group):
            cleaned.unlink()
            logger.info("Log %s: segments changed during compaction; skipped", log.name)
            return False
        _swap(log, group, cleaned)
    return True


def _kept_records(
    h: BatchHeader,
    records: list[Record],
    offset_map: OffsetMap,
    delete_horizon: int,
    stats: CleanerStats,
) -> list[Record]:
    """The records of a batch that stay: each the last of its key, and a tombstone only
    until its batch passes the delete horizon (the earliest expiry kept is noted)."""
    expired = h.max_timestamp < delete_horizon
    keep = []
    for r in records:
        if r.key is not None and offset_map.get(r.key) > r.offset:
            continue  # a later record of the key is in the dirty range
        if r.key is not None and r.value is None:
            if expired:
                continue
            expiry = stats.next_tombstone_expiry_ms
            if expiry is None or h.max_timestamp < expiry:
                stats.next_tombstone_expiry_ms = h.max_timestamp
        keep.append(r)
    return keep


def _clean_batch(
    h: BatchHeader,
    data: bytes,
    offset_map: OffsetMap,
    decisions: _Decisions,
    delete_horizon: int,
    end: int,
    stats: CleanerStats,
) -> bytes:
    """The batch to keep: `data` itself, a re-encoded smaller batch, or b"" (drop it)."""
    if h.is_control or h.base_offset >= end:
        return data  # markers stay; past the pass's end nothing is decided yet
    if h.is_transactional:
        outcome = _outcome(h, decisions)
        if outcome is None:
            return data
        if outcome is False:
            return b""
    try:
        records = decode_records(data)
    except UnsupportedCompressionTypeError:
        return data
    keep = _kept_records(h, records, offset_map, delete_horizon, stats)
    if len(keep) == len(records):
        return data
    if not keep:
        return b""
    return encode_batch(
        b"".join(r.raw for r in keep),
        records_count=len(keep),
        last_offset_delta=h.last_offset_delta,
        base_offset=h.base_offset,
        attributes=h.attributes & ~COMPRESSION_MASK,
        base_timestamp=h.base_timestamp,
        max_timestamp=h.max_timestamp,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        partition_leader_epoch=h.partition_leader_epoch,
    )


def _still_there(current: list[LogSegment], group: list[LogSegment]) -> bool:
    try:
        i = current.index(group[0])
    except ValueError:
        return False
    return current[i : i + len(group)] == group and i + len(group) < len(current)


def _swap(log: PartitionLog, group: list[LogSegment], cleaned: Path) -> None:
    """Replace `group` by the cleaned file (caller holds the log's lock)."""
    directory = log.directory
    base = group[0].base_offset
    aborted = [t for seg in group for t in seg.txn_index.entries]
    doomed: list[Path] = []
    for seg in reversed(group):  # the group's first segment last: its rename commits the swap
        for idx in (seg.offset_index, seg.time_index, seg.txn_index):
            idx.delete()
        seg.close()
        target = seg.log_path.with_name(seg.log_path.name + DELETED_SUFFIX)
        os.replace(seg.log_path, target)
        doomed.append(target)
    os.replace(cleaned, segment_file(directory, base, LOG_SUFFIX))
    fsync_dir(directory)
    new = LogSegment(directory, base, index_interval_bytes=log.config.index_interval_bytes)
    new.recover()
    new.on_become_inactive()
    for t in aborted:
        new.txn_index.append(t)
    new.flush()
    log.replace_segments(group, new)
    for path in doomed:
        path.unlink(missing_ok=True)
    logger.info(
        "Log %s: compacted %d segment(s) from offset %d into %d bytes",
        log.name,
        len(group),
        base,
        new.size,
    )
