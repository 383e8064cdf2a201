"""Idempotent and transactional producers, as the coordinator asks the partitions about them.

Each partition's producer state (epochs, sequence windows, open transactions)
belongs to its log (``streams.broker.storage.producer_state``, Kafka's
``ProducerStateManager``): the log updates it with every append, indexes
aborted transactions with their markers, snapshots it at rolls and clean
shutdowns and restores it when it opens, so nothing here ever scans a log.
This module decides on a produce before the append (``check``: ``Duplicate``,
``Rejected`` or ``None``), answers the last stable offset's bound and expires
idle producers (``producer.id.expiration.ms``).

Concurrency contract: not thread-safe; called from the broker's loop thread
with no ``await`` between ``check`` and the append (the server's rule).
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.errors import BrokerError
from streams.broker.storage.producer_state import (
    Duplicate,
    PartitionProducers,
    Rejected,
    iter_headers,
)

logger = logging.getLogger(__name__)

__all__ = ["Duplicate", "ProducerStateManager", "Rejected"]


class ProducerStateManager:
    """The producer state of every partition of a `LogManager`, through its logs."""

    def __init__(self, log_manager: Any) -> None:
        self._logs = log_manager

    def partition(self, topic: str, partition: int) -> PartitionProducers:
        """The partition's state; an empty one when the partition does not exist."""
        try:
            return self._logs.get_log(topic, partition).producer_state  # type: ignore[no-any-return]
        except (BrokerError, OSError):  # unknown partition, or the log dir is offline
            return PartitionProducers()

    def check(
        self, topic: str, partition: int, records: bytes | memoryview
    ) -> Duplicate | Rejected | None:
        """Decide on a produce of ``records``: ``None`` to append, else ack the duplicate or reject."""
        batches = list(iter_headers(records))
        if all(b.producer_id < 0 and not b.is_control for b in batches):
            return None  # plain producers: nothing to check
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

    def first_unstable_offset(self, topic: str, partition: int) -> int | None:
        return self.partition(topic, partition).first_unstable_offset()

    def expire(self, now_ms: int, max_idle_ms: int) -> int:
        """Kafka's ``producer.id.expiration.ms``: drop producers idle longer than ``max_idle_ms``.

        An expired producer that comes back is treated as new (any sequence accepted).
        """
        n = sum(log.expire_producers(now_ms - max_idle_ms) for _, _, log in self._logs.logs())
        if n:
            logger.info("expired %d idle producer entries (idle > %d ms)", n, max_idle_ms)
        return n
