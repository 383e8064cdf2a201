"""A small, independent RecordBatch v2 encoder for the storage tests.

Written from the Kafka protocol description, not from the code under test, so
round-trip tests compare two implementations. `kafka_python_batch` builds
batches with kafka-python's own builder for a third opinion.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from crc32c import crc32c


def zigzag_varint(value: int) -> bytes:
    v = (value << 1) ^ (value >> 63)
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = v & 0x7F
        v >>= 7
        if v:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes_field(value: bytes | None) -> bytes:
    if value is None:
        return zigzag_varint(-1)
    return zigzag_varint(len(value)) + value


@dataclass
class Rec:
    key: bytes | None
    value: bytes | None
    timestamp_delta: int = 0
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def encode_record(rec: Rec, offset_delta: int) -> bytes:
    body = (
        b"\x00"
        + zigzag_varint(rec.timestamp_delta)
        + zigzag_varint(offset_delta)
        + _bytes_field(rec.key)
        + _bytes_field(rec.value)
        + zigzag_varint(len(rec.headers))
        + b"".join(_bytes_field(k.encode()) + _bytes_field(v) for k, v in rec.headers)
    )
    return zigzag_varint(len(body)) + body


def make_batch(
    records: list[Rec],
    *,
    base_offset: int = 0,
    base_timestamp: int = 1_700_000_000_000,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    last_offset_delta: int | None = None,
) -> bytes:
    """One uncompressed batch; records get offset deltas 0..n-1."""
    payload = b"".join(encode_record(r, i) for i, r in enumerate(records))
    max_ts = base_timestamp + max((r.timestamp_delta for r in records), default=0)
    lod = len(records) - 1 if last_offset_delta is None else last_offset_delta
    body = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            lod,
            base_timestamp,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + payload
    )
    head = struct.pack(">qiib", base_offset, len(body) + 9, partition_leader_epoch, 2)
    return head + struct.pack(">I", crc32c(body)) + body


def value_batch(
    n: int, *, size: int = 100, key_prefix: bytes = b"k", ts: int = 1_700_000_000_000
) -> bytes:
    return make_batch(
        [Rec(key_prefix + str(i).encode(), bytes([i % 251]) * size, i) for i in range(n)],
        base_timestamp=ts,
    )


def kafka_python_batch(
    records: list[tuple[bytes | None, bytes | None, int]], *, compression: int = 0
) -> bytes:
    """A batch from kafka-python's DefaultRecordBatchBuilder: (key, value, timestamp_ms)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i, (key, value, ts) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=[])
    return bytes(builder.build())


def kafka_python_records(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Decode concatenated batches with kafka-python: (offset, timestamp, key, value)."""
    from kafka.record.memory_records import MemoryRecords

    out = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value))
    return out
