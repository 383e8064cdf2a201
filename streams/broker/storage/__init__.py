"""The broker's storage layer: the commit log (Kafka `storage/internals/log`).

Public API (see each module's docstring):

- `PartitionLog(dir, *, config)`: append/read/flush/roll/truncate/retention of one
  partition; `AppendInfo` is what `append` returns.
- `LogManager(data_dir, *, default_config)`: every partition under a data dir,
  topic metadata and configs in `topics.json`, flush/retention/compaction drivers.
- `LogConfig`: per-topic settings from Kafka-style `dict[str, str]`; `CleanerConfig`:
  the broker-wide `log.cleaner.*` settings.
- `LogCleanerManager`: the cleaner checkpoints and the dirty-ratio choice of what to
  compact (`LogManager.cleaner`); `LogDirFailureChannel`: the offline log dir.
- `FileRecords`: what `PartitionLog.read_records` returns, batches left in the
  segment files for a zero-copy send.
- `LogSegment`, `OffsetIndex`, `TimeIndex`, `TransactionIndex`, `LogLoader`.
- Batch helpers: `BatchHeader`, `parse_batch_header`, `iter_batches`,
  `validate_batches`, `build_control_batch`; `decode_records` (off the hot path),
  `keyless_records` (the key check of a produce to a compacted topic).
- Errors are the broker's own (`streams.broker.errors`), each with its Kafka `errno`.
"""

from __future__ import annotations

from streams.broker.storage.batch import (
    BatchHeader,
    build_control_batch,
    iter_batches,
    parse_batch_header,
    validate_batches,
)
from streams.broker.storage.cleaner_manager import LogCleanerManager
from streams.broker.storage.config import CleanerConfig, LogConfig
from streams.broker.storage.file_records import FileRecords
from streams.broker.storage.index import AbortedTxn, OffsetIndex, TimeIndex, TransactionIndex
from streams.broker.storage.loader import LogLoader
from streams.broker.storage.log import AppendInfo, PartitionLog
from streams.broker.storage.log_dir import LogDirFailureChannel
from streams.broker.storage.manager import LogManager, TopicMetadata, validate_topic_name
from streams.broker.storage.records import Record, decode_records, keyless_records
from streams.broker.storage.segment import LogSegment

__all__ = [
    "AbortedTxn",
    "AppendInfo",
    "BatchHeader",
    "CleanerConfig",
    "FileRecords",
    "LogCleanerManager",
    "LogConfig",
    "LogDirFailureChannel",
    "LogLoader",
    "LogManager",
    "LogSegment",
    "OffsetIndex",
    "PartitionLog",
    "Record",
    "TimeIndex",
    "TopicMetadata",
    "TransactionIndex",
    "build_control_batch",
    "decode_records",
    "iter_batches",
    "keyless_records",
    "parse_batch_header",
    "validate_batches",
    "validate_topic_name",
]
