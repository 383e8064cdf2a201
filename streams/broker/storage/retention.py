"""Which segments retention deletes (Kafka's `deleteRetentionMsBreachedSegments` and
`deleteRetentionSizeBreachedSegments`): always whole segments, oldest first.

A segment goes when every batch in it is below the high watermark and either
its largest timestamp is older than `retention.ms` (the file's mtime when it has
no timestamps) or the log stays at least `retention.bytes` large without it.
"""

from __future__ import annotations

import os

from streams.broker.storage.config import LogConfig
from streams.broker.storage.segment import LogSegment


def largest_timestamp(seg: LogSegment) -> int:
    if seg.max_timestamp >= 0:
        return seg.max_timestamp
    return int(os.stat(seg.log_path).st_mtime * 1000)


def expired_prefix(
    segments: list[LogSegment], config: LogConfig, now_ms: int, high_watermark: int
) -> int:
    """How many leading segments retention may delete (the caller keeps an active one)."""
    remaining = sum(s.size for s in segments)
    n = 0
    for seg in segments:
        if seg.next_offset > high_watermark:
            break
        by_time = config.retention_ms >= 0 and largest_timestamp(seg) < now_ms - config.retention_ms
        by_size = config.retention_bytes >= 0 and remaining - seg.size >= config.retention_bytes
        if not (by_time or by_size):
            break
        remaining -= seg.size
        n += 1
    return n
