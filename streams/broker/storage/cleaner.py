"""Log compaction for `cleanup.policy=compact` (Kafka's `LogCleaner`, simplified).

`compact_log(log, now_ms)` rewrites the cleanable segments of one partition:
the non-active segments whose batches are all below the high watermark and
older than `min.compaction.lag.ms`. For every key it keeps only the record with
the highest offset (looking at the cleanable range); tombstones (null value)
are dropped once their batch's max timestamp is older than
`delete.retention.ms`. Offsets never change: a batch that loses records is
re-encoded uncompressed with the same base offset and `lastOffsetDelta`, and
its surviving records are copied byte for byte (their deltas stay valid).

Transactions: markers found anywhere in the log (active segment included)
decide each transactional batch: data of aborted transactions is dropped, data
of committed ones is compacted like any other, and batches of transactions
with no marker yet are kept whole and shadow nothing. Control batches are kept.
Batches compressed with a codec this Python cannot read are kept whole.

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
from streams.broker.storage.records import decode_records
from streams.broker.storage.segment import LogSegment

logger = logging.getLogger(__name__)

_Decisions = dict[int, tuple[list[int], list[bool]]]


def compact_log(log: PartitionLog, now_ms: int) -> int:
    """Compact one log; returns how many segments were rewritten.

    Appends and reads continue meanwhile (the log's lock is only taken for each
    swap); retention and truncation of this log wait for the end.
    """
    with log.segments_lock:
        return _compact(log, now_ms)


def _compact(log: PartitionLog, now_ms: int) -> int:
    config = log.config
    segments = log.segments
    hw = log.high_watermark
    horizon = now_ms - config.min_compaction_lag_ms
    cleanable: list[LogSegment] = []
    for seg in segments[:-1]:
        if seg.next_offset > hw or seg.max_timestamp > horizon:
            break
        cleanable.append(seg)
    if not cleanable:
        return 0
    decisions = _transaction_decisions(segments)
    latest = _offset_map(cleanable, decisions)
    delete_horizon = now_ms - config.delete_retention_ms
    rewritten = 0
    for group in _groups(cleanable, config.segment_bytes):
        if _clean_group(log, group, latest, decisions, delete_horizon):
            rewritten += len(group)
    return rewritten


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


def _batches(seg: LogSegment) -> list[tuple[BatchHeader, bytes]]:
    return [(h, seg.read_at(h.position, h.size)) for h in seg.scan_headers(0)]


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


def _offset_map(segments: list[LogSegment], decisions: _Decisions) -> dict[bytes, int]:
    latest: dict[bytes, int] = {}
    for seg in segments:
        for h, data in _batches(seg):
            if h.is_control or (h.is_transactional and _outcome(h, decisions) is not True):
                continue
            try:
                records = decode_records(data)
            except UnsupportedCompressionTypeError:
                continue
            for r in records:
                if r.key is not None:
                    latest[r.key] = r.offset
    return latest


def _clean_group(
    log: PartitionLog,
    group: list[LogSegment],
    latest: dict[bytes, int],
    decisions: _Decisions,
    delete_horizon: int,
) -> bool:
    base = group[0].base_offset
    directory = log.directory
    out: list[bytes] = []
    changed = False
    for seg in group:
        for h, data in _batches(seg):
            kept = _clean_batch(h, data, latest, decisions, delete_horizon)
            changed |= kept is not data
            if kept:
                out.append(kept)
    if not changed and len(group) == 1:
        return False  # nothing to drop and nothing to merge
    cleaned = segment_file(directory, base, LOG_SUFFIX + CLEANED_SUFFIX)
    with open(cleaned, "wb") as f:
        for chunk in out:
            f.write(chunk)
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


def _clean_batch(
    h: BatchHeader,
    data: bytes,
    latest: dict[bytes, int],
    decisions: _Decisions,
    delete_horizon: int,
) -> bytes:
    """The batch to keep: `data` itself, a re-encoded smaller batch, or b"" (drop it)."""
    if h.is_control:
        return data
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
    expired = h.max_timestamp < delete_horizon
    keep = [
        r
        for r in records
        if r.key is None or (latest.get(r.key) == r.offset and not (r.value is None and expired))
    ]
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
