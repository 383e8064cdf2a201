"""Idempotent-producer state per partition: epochs, sequence windows, open transactions.

For every (topic, partition) and producer id the broker remembers the
producer's epoch, the sequence ranges and offsets of its last five batches
(librdkafka and the Java client keep at most five in flight), and the first
offset of its open transaction. That is enough to

- acknowledge a retried batch with its original offset without a second
  append (``Duplicate``), reject a gap (``OUT_OF_ORDER_SEQUENCE_NUMBER``) or a
  zombie epoch (``INVALID_PRODUCER_EPOCH``) — Kafka's ``ProducerStateManager``;
- compute the last stable offset: the first offset of the earliest open
  transaction, else the high watermark.

State is rebuilt from the partition's own batch headers the first time a
partition is touched after a start (``load_partition``): data batches advance
the sequence window and open transactions, control batches close them. Only
the fixed 61-byte RecordBatch header is read, never the records. One
partition's entries and the checks on them are ``PartitionProducers``
(partition_producers.py); this module loads, snapshots and dispatches to them.

Concurrency contract: not thread-safe; called from the broker's loop thread
with no ``await`` between ``check`` and ``on_appended`` (the server's rule).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.coordinator.partition_producers import (
    Duplicate,
    PartitionProducers,
    Rejected,
    iter_batch_info,
)

logger = logging.getLogger(__name__)

_SCAN_CHUNK = 8 * 1024 * 1024


class ProducerStateManager:
    """Producer entries of every partition, loaded lazily from the logs.

    A partition's state is tied to the log object it was built from: when a
    topic is deleted and created again, the new log gets fresh state. At a clean
    shutdown ``snapshot()`` returns every loaded partition's state with the log
    end offset it is valid for; ``restore()`` of that snapshot on the next start
    lets a partition skip the scan when its log still ends there (or scan only
    the tail written after it).
    """

    def __init__(
        self,
        get_log: Callable[[str, int], Any] | None,
        *,
        topic_id: Callable[[str], str | None] = lambda topic: None,
    ) -> None:
        self._get_log = get_log
        self._topic_id = topic_id  # tells a recreated topic from the one a snapshot was of
        self._partitions: dict[tuple[str, int], tuple[Any, PartitionProducers]] = {}
        # (topic, partition) -> (end offset, state, topic id) from the last clean shutdown
        self._snapshots: dict[tuple[str, int], tuple[int, dict[str, Any], str | None]] = {}

    def partition(self, topic: str, partition: int) -> PartitionProducers:
        log = self._get_log(topic, partition) if self._get_log is not None else None
        cached = self._partitions.get((topic, partition))
        if cached is not None and cached[0] is log:
            return cached[1]
        state = self.load_partition(topic, partition, log)
        self._partitions[(topic, partition)] = (log, state)
        return state

    def load_partition(self, topic: str, partition: int, log: Any = None) -> PartitionProducers:
        state = PartitionProducers()
        if log is None:
            return state
        offset, end, n = log.log_start_offset, log.log_end_offset, 0
        snap = self._snapshots.pop((topic, partition), None)
        if snap is not None and (
            snap[2] != self._topic_id(topic) or not log.log_start_offset <= snap[0] <= end
        ):
            snap = None  # of a deleted topic, or of a log that was truncated since
        if snap is not None:
            state = PartitionProducers.from_json(snap[1])
            offset = snap[0]
        while offset < end:
            data = log.read(offset, _SCAN_CHUNK)
            next_offset = offset
            for batch in iter_batch_info(data):
                last = batch.base_offset + batch.last_offset_delta
                if last >= offset:
                    state.update(batch, batch.base_offset)
                    n += 1
                next_offset = max(next_offset, last + 1)
            if next_offset <= offset:
                break
            offset = next_offset
        if n or state.entries:
            logger.info(
                "%s-%d: producer state of %d producers (%s, %d batches scanned; open transactions from %s)",
                topic,
                partition,
                len(state.entries),
                "from snapshot" if snap is not None else "rebuilt from the log",
                n,
                state.first_unstable_offset(),
            )
        return state

    def snapshot(self) -> list[dict[str, Any]]:
        """Every loaded partition's state with the log end offset it is valid for."""
        out = []
        for (topic, partition), (log, state) in self._partitions.items():
            if log is None:
                continue
            out.append(
                {
                    "topic": topic,
                    "topic_id": self._topic_id(topic),
                    "partition": partition,
                    "end": log.log_end_offset,
                    "state": state.to_json(),
                }
            )
        # restored but never touched since: still valid up to their offset (a later load
        # scans whatever was appended after it), as long as the topic is the same one
        for (topic, partition), (end, state_json, topic_id) in self._snapshots.items():
            out.append(
                {
                    "topic": topic,
                    "topic_id": topic_id,
                    "partition": partition,
                    "end": end,
                    "state": state_json,
                }
            )
        return out

    def restore(self, snapshot: list[dict[str, Any]]) -> None:
        for item in snapshot:
            if item.get("topic_id") != self._topic_id(item["topic"]):
                continue  # the topic was deleted (or deleted and created again) since
            self._snapshots[(item["topic"], item["partition"])] = (
                item["end"],
                item["state"],
                item.get("topic_id"),
            )

    def forget(self, topic: str) -> None:
        """Drop every state of ``topic`` (deleted); a topic created again starts empty."""
        for key in [k for k in self._partitions if k[0] == topic]:
            del self._partitions[key]
        for key in [k for k in self._snapshots if k[0] == topic]:
            del self._snapshots[key]

    def check(
        self, topic: str, partition: int, records: bytes | memoryview
    ) -> Duplicate | Rejected | None:
        """Decide on a produce of ``records``: ``None`` to append, else ack the duplicate or reject."""
        batches = list(iter_batch_info(records))
        if all(b.producer_id < 0 and not b.is_control for b in batches):
            return None  # plain producers: nothing to check, no state to load
        state = self.partition(topic, partition)
        for i, batch in enumerate(batches):
            if batch.is_control:
                return Rejected(ErrorCode.invalid_record, "clients may not produce control batches")
            verdict = state.check(batch)
            if isinstance(verdict, Duplicate) and i == 0 and len(batches) == 1:
                logger.info(
                    "%s-%d: duplicate batch of producer %d (sequence %d) acknowledged at offset %d",
                    topic,
                    partition,
                    batch.producer_id,
                    batch.base_sequence,
                    verdict.base_offset,
                )
                return verdict
            if isinstance(verdict, Duplicate):
                return Rejected(
                    ErrorCode.duplicate_sequence_number,
                    "duplicate batch inside a multi-batch produce",
                )
            if verdict is not None:
                logger.warning("%s-%d: produce rejected: %s", topic, partition, verdict.message)
                return verdict
        return None

    def on_appended(
        self, topic: str, partition: int, records: bytes | memoryview, base_offset: int
    ) -> None:
        batches = list(iter_batch_info(records))
        if all(b.producer_id < 0 for b in batches):
            if (topic, partition) not in self._partitions and (
                topic,
                partition,
            ) not in self._snapshots:
                log = self._get_log(topic, partition) if self._get_log is not None else None
                if log is not None and base_offset <= log.log_start_offset:
                    # the log held nothing before these batches: the state is known to be
                    # empty, so a read_committed fetch need not scan the log to learn that
                    self._partitions[(topic, partition)] = (log, PartitionProducers())
            return  # otherwise a later first load scans these batches anyway
        state = self.partition(topic, partition)
        offset = base_offset
        for batch in batches:
            state.update(batch, offset)
            offset += batch.last_offset_delta + 1

    def first_unstable_offset(self, topic: str, partition: int) -> int | None:
        return self.partition(topic, partition).first_unstable_offset()

    def expire(self, now_ms: int, max_idle_ms: int) -> int:
        """Kafka's ``producer.id.expiration.ms``: drop producers idle longer than ``max_idle_ms``.

        An expired producer that comes back is treated as new (any sequence accepted).
        """
        n = sum(state.expire(now_ms - max_idle_ms) for _, state in self._partitions.values())
        if n:
            logger.info("expired %d idle producer entries (idle > %d ms)", n, max_idle_ms)
        return n
