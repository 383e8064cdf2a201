"""Executor side of the Kafka source: read one offset range into Arrow record batches.

Per-record Python work is the cost here (DESIGN.md §3), so each `consume()` result of
up to `batch_records` messages becomes one Arrow batch through `map` over the unbound
`Message` accessors (no bound-method objects, no per-record dicts or tuples beyond the
timestamp pair librdkafka returns) and column-wise Arrow construction.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from streams.kafka.errors import DataLossError, KafkaReadError
from streams.kafka.offsets import OffsetRange

logger = logging.getLogger(__name__)

HEADER_TYPE = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)

_value = Message.value
_key = Message.key
_offset = Message.offset
_timestamp = Message.timestamp
_headers = Message.headers
_error = Message.error

# Spark's native source reports Kafka's TimestampType ids: CreateTime 0, LogAppendTime 1;
# librdkafka numbers them 1 and 2 (0 = not available).
_LOSS_CODES = {KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET}


def consumer_config(
    bootstrap: str, client_config: Mapping[str, Any], *, isolation_level: str, size: int
) -> dict[str, Any]:
    """librdkafka settings for reading one exact range as fast as the client allows.

    `fetch.queue.backoff.ms=0`: the default 1000 ms back-off once the prefetch queue is
    full caps small records at ~150k/s. `auto.offset.reset=error`: a start offset that
    retention already deleted must surface as data loss, never a silent jump.
    """
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"warehouse-source-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        "isolation.level": isolation_level,
        "fetch.queue.backoff.ms": 0,
        "fetch.wait.max.ms": 10,
        "fetch.max.bytes": 64 * 1024 * 1024,
        "max.partition.fetch.bytes": 16 * 1024 * 1024,
        "queued.min.messages": max(1000, min(size, 1_000_000)),
        "queued.max.messages.kbytes": 256 * 1024,
        "receive.message.max.bytes": 100 * 1024 * 1024,
        "check.crcs": False,
    }
    conf.update(client_config)
    # The source tracks offsets in Spark's checkpoint; committing to a group would
    # only leak state into the broker.
    conf["enable.auto.commit"] = False
    conf["enable.partition.eof"] = True
    conf["auto.offset.reset"] = "error"
    return conf


def _to_batch(msgs: list[Message], topic: str, partition: int, schema: pa.Schema) -> pa.RecordBatch:
    n = len(msgs)
    ts = list(map(_timestamp, msgs))
    ts_type = pa.array([t[0] for t in ts], pa.int32())
    ts_ms = pa.array([t[1] for t in ts], pa.int64())
    if pc.any(pc.equal(ts_type, 0)).as_py():
        missing = pc.equal(ts_type, 0)
        ts_ms = pc.if_else(missing, pa.scalar(None, pa.int64()), ts_ms)
    timestamps = pc.multiply(ts_ms, 1000).cast(pa.timestamp("us", tz="UTC"))
    hdrs = list(map(_headers, msgs))
    if any(hdrs):
        headers = pa.array(
            [None if h is None else [{"key": k, "value": v} for k, v in h] for h in hdrs],
            HEADER_TYPE,
        )
    else:
        headers = pa.nulls(n, HEADER_TYPE)
    arrays = [
        pa.array(list(map(_key, msgs)), pa.binary()),
        pa.array(list(map(_value, msgs)), pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array(list(map(_offset, msgs)), pa.int64()),
        timestamps,
        pc.subtract(ts_type, 1),
        headers,
    ]
    return pa.RecordBatch.from_arrays(
        [a.cast(f.type) if a.type != f.type else a for a, f in zip(arrays, schema, strict=True)],
        schema=schema,
    )


def _first_at_or_after(msgs: list[Message], end: int) -> int:
    lo, hi = 0, len(msgs)
    while lo < hi:
        mid = (lo + hi) // 2
        if msgs[mid].offset() < end:
            lo = mid + 1
        else:
            hi = mid
    return lo


def read_range(
    rng: OffsetRange,
    conf: Mapping[str, Any],
    schema: pa.Schema,
    *,
    on_data_loss: str = "fail",
    batch_records: int = 10000,
    stall_timeout: float = 120.0,
) -> Iterator[pa.RecordBatch]:
    """Yield the records of `rng` — exactly those with offset in `[start, end)` — as
    Arrow batches. Gaps (compaction, transaction markers, aborted records under
    read_committed) are skipped; the read ends when a record at or past `end` arrives,
    or the client reports the partition's end at or past `end`, or its position is."""
    topic, partition, end = rng.topic, rng.partition, rng.end
    if rng.start >= end:
        return
    consumer = Consumer(dict(conf))
    try:
        consumer.assign([TopicPartition(topic, partition, rng.start)])
        pos = rng.start
        last_progress = time.monotonic()
        done = False
        while not done:
            msgs = consumer.consume(num_messages=batch_records, timeout=1.0)
            if msgs and any(map(_error, msgs)):
                good: list[Message] = []
                for m in msgs:
                    err = m.error()
                    if err is None:
                        good.append(m)
                    elif err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= end:
                            done = True
                    elif err.code() in _LOSS_CODES:
                        pos = _on_out_of_range(consumer, rng, pos, err, on_data_loss)
                        if pos >= end:
                            done = True
                    elif err.fatal() or not err.retriable():
                        raise KafkaReadError(
                            f"Topic `{topic}` partition {partition}: reading offsets "
                            f"[{rng.start}, {end}) failed at {pos}: {err.str()}.",
                            topic=topic,
                            partition=partition,
                        )
                    else:
                        logger.warning(
                            "topic %s partition %d: retriable error at offset %d: %s",
                            topic,
                            partition,
                            pos,
                            err.str(),
                        )
                msgs = good
            if msgs:
                if msgs[-1].offset() >= end:
                    msgs = msgs[: _first_at_or_after(msgs, end)]
                    done = True
                if msgs:
                    pos = msgs[-1].offset() + 1
                    yield _to_batch(msgs, topic, partition, schema)
                last_progress = time.monotonic()
                if pos >= end:
                    done = True
                continue
            if done:
                break
            # Nothing came: a tail made only of control records ends here.
            position = consumer.position([TopicPartition(topic, partition)])[0].offset
            if position >= end:
                break
            if time.monotonic() - last_progress > stall_timeout:
                raise KafkaReadError(
                    f"Topic `{topic}` partition {partition}: no record arrived for "
                    f"{stall_timeout:.0f}s at offset {max(pos, position)} while reading up to "
                    f"{end}. Is the broker reachable and the partition's leader available?",
                    topic=topic,
                    partition=partition,
                )
    finally:
        consumer.close()


def _on_out_of_range(
    consumer: Consumer, rng: OffsetRange, pos: int, err: KafkaError, on_data_loss: str
) -> int:
    tp = TopicPartition(rng.topic, rng.partition)
    low, _ = consumer.get_watermark_offsets(tp, timeout=30, cached=False)
    if on_data_loss != "skip":
        raise DataLossError(
            f"Topic `{rng.topic}` partition {rng.partition}: offset {pos} is no longer "
            f"available, the earliest offset is {low} (deleted by retention?). Records "
            f'[{pos}, {min(low, rng.end)}) are lost. Set on_data_loss="skip" to continue '
            "from the earliest offset, or reset the query.",
            topic=rng.topic,
            partition=rng.partition,
            expected_offset=pos,
            earliest_offset=low,
        )
    logger.warning(
        "topic %s partition %d: offsets [%d, %d) were deleted before they were read; "
        "skipping to %d (%s)",
        rng.topic,
        rng.partition,
        pos,
        low,
        low,
        err.str(),
    )
    if low < rng.end:
        consumer.assign([TopicPartition(rng.topic, rng.partition, low)])
    return low
