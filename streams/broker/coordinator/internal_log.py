"""Internal compacted topics the coordinator keeps its state in.

``__consumer_offsets`` (group metadata and committed offsets),
``__transaction_state`` (producer-id blocks and transaction metadata) and
``__cluster_metadata`` (SCRAM credentials and ACLs, as Kafka keeps them in its metadata
log; hidden from clients like Kafka's) are ordinary single-partition topics created through the storage ``LogManager``
with ``cleanup.policy=compact``: each state change is a record whose key names
the thing that changed and whose value is its new state as JSON (``None`` is a
tombstone). Replaying the log from the start in order rebuilds the state;
compaction keeps only the last record per key, which is all replay needs.
Records are written as genuine RecordBatch v2 (kio's record writer), so the
storage layer and any Kafka client can read these topics.

Concurrency contract: not thread-safe; used from the broker's loop thread.
"""

from __future__ import annotations

import datetime
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import i8, i16, i32, i64

from streams.broker.errors import KafkaStorageError

logger = logging.getLogger(__name__)

CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"
CLUSTER_METADATA = "__cluster_metadata"
INTERNAL_TOPICS = (CONSUMER_OFFSETS, TRANSACTION_STATE)
_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": str(16 * 1024 * 1024)}
_READ_CHUNK = 4 * 1024 * 1024


def encode_key(key: dict[str, Any]) -> bytes:
    return json.dumps(key, sort_keys=True, separators=(",", ":")).encode()


def encode_batch(records: list[tuple[bytes, bytes | None]], *, timestamp_ms: int) -> bytes:
    """A non-transactional RecordBatch v2 holding ``records`` (offsets are assigned on append)."""
    ts = datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.UTC)
    batch = NewRecordBatch(
        producer_id=i64(-1),
        producer_epoch=i16(-1),
        base_sequence=i32(-1),
        attributes=i16(0),
        records=tuple(
            Record(attributes=i8(0), timestamp=ts, offset=i64(i), key=k, value=v, headers=())
            for i, (k, v) in enumerate(records)
        ),
    )
    buf = io.BytesIO()
    write_new_batch(buf, batch)
    return buf.getvalue()


def decode_batches(data: bytes) -> Iterator[tuple[int, int, bytes | None, bytes | None]]:
    """Yield ``(offset, attributes, key, value)`` per record of whole batches in ``data``."""
    pos = 0
    view = memoryview(data)
    while len(data) - pos >= 12:
        length = int.from_bytes(view[pos + 8 : pos + 12], "big", signed=True)
        if len(data) - pos < 12 + length:
            break  # a trailing partial batch (read() may cut at max_bytes)
        batch, size = read_batch(view, pos)
        pos += size
        for record in batch.records:
            yield record.offset, batch.attributes, record.key, record.value


class InternalLog:
    """One internal compacted topic (partition 0) with JSON keys and values."""

    def __init__(self, log_manager: Any, topic: str) -> None:
        self.topic = topic
        if not _has_topic(log_manager, topic):
            log_manager.create_topic(topic, 1, dict(_TOPIC_CONFIG))
            logger.info("created internal topic %s", topic)
        self._log = log_manager.get_log(topic, 0)

    def append(
        self, records: list[tuple[dict[str, Any], dict[str, Any] | None]], *, now_ms: int
    ) -> None:
        """Write ``records`` as one batch; raises ``KafkaStorageError`` when the write fails
        (the storage then takes the log dir offline), and nothing of them is applied."""
        if not records:
            return
        encoded = [
            (encode_key(k), None if v is None else json.dumps(v, separators=(",", ":")).encode())
            for k, v in records
        ]
        try:
            self._log.append(encode_batch(encoded, timestamp_ms=now_ms))
        except OSError as e:
            raise KafkaStorageError(
                f"Internal topic `{self.topic}`: append of {len(records)} records failed: {e}",
                topic=self.topic,
                partition=0,
            ) from e

    def replay(self) -> Iterator[tuple[dict[str, Any], dict[str, Any] | None]]:
        """Every record from the log start in offset order, decoded."""
        offset = self._log.log_start_offset
        end = self._log.log_end_offset
        while offset < end:
            data = self._log.read(offset, _READ_CHUNK)
            if not data:
                break
            last = offset - 1
            for rec_offset, _attrs, key, value in decode_batches(data):
                last = rec_offset
                if rec_offset < offset or key is None:
                    continue
                yield json.loads(key), None if value is None else json.loads(value)
            if last < offset:
                break
            offset = last + 1

    def flush(self) -> None:
        self._log.flush()


def _has_topic(log_manager: Any, topic: str) -> bool:
    topics = log_manager.topics()
    if isinstance(topics, dict):
        return topic in topics
    return any(getattr(t, "name", t) == topic for t in topics)
