"""Decoding the records inside a batch: only off the hot path.

Fetches never come here. Three places need records: `offset_for_timestamp`
(the exact record whose timestamp reaches a target, ListOffsets), the
compaction of `cleanup.policy=compact` topics (record keys), and a produce to a
compacted topic (`keyless_records`: Kafka refuses records without a key there), and
the type of a transaction marker (`is_abort_marker`: recovery rebuilds the transaction
index from the markers, the cleaner decides transactions by them). Compressed batches
are decompressed with the codecs this Python has: gzip always; snappy, lz4 and
zstd are reported as `UnsupportedCompressionTypeError` (the cleaner then keeps such
batches whole, and timestamp lookups fall back to the batch).

Record layout (Kafka v2): length varint, attributes int8, timestampDelta
varlong, offsetDelta varint, keyLength varint + key, valueLength varint +
value, headerCount varint + headers; lengths of -1 mean null.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from streams.broker.errors import CorruptMessageError, UnsupportedCompressionTypeError
from streams.broker.storage.batch import (
    CONTROL_ABORT,
    HEADER_SIZE,
    iter_batches,
    parse_batch_header,
)

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    raw: bytes  # the record's bytes (length prefix included), reusable as-is in the same batch


def control_type(batch: bytes) -> int | None:
    """The type of a control batch's record (0 abort, 1 commit), None when unreadable."""
    try:
        key = decode_records(batch)[0].key
        return struct.unpack(">hh", key or b"")[1]
    except (CorruptMessageError, UnsupportedCompressionTypeError, IndexError, struct.error):
        return None


def is_abort_marker(batch: bytes) -> bool:
    return control_type(batch) == CONTROL_ABORT


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    result = 0
    while True:
        if pos >= len(buf):
            raise CorruptMessageError(
                f"Record varint runs past the end of the batch at byte `{pos}`."
            )
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptMessageError(f"Record varint at byte `{pos}` is longer than 10 bytes.")
    return (result >> 1) ^ -(result & 1), pos


def records_payload(batch: bytes) -> bytes:
    """The (decompressed) record bytes of one batch."""
    header = parse_batch_header(batch)
    data = bytes(batch[HEADER_SIZE : header.size])
    codec = header.compression
    if codec == 0:
        return data
    if codec == 1:
        try:
            return zlib.decompress(data, 16 + zlib.MAX_WBITS)
        except zlib.error as e:
            raise CorruptMessageError(
                f"gzip batch at offset `{header.base_offset}` is corrupt: {e}"
            ) from e
    raise UnsupportedCompressionTypeError(
        f"Batch at offset `{header.base_offset}` is compressed with "
        f"`{_CODECS.get(codec, codec)}`, which the storage layer cannot decompress."
    )


def decode_records(batch: bytes) -> list[Record]:
    """Every record of one batch with absolute offsets and timestamps."""
    header = parse_batch_header(batch)
    payload = records_payload(batch)
    out: list[Record] = []
    pos = 0
    for _ in range(header.records_count):
        start = pos
        length, pos = _read_varint(payload, pos)
        end = pos + length
        if length < 0 or end > len(payload):
            raise CorruptMessageError(
                f"Record at byte `{start}` of batch `{header.base_offset}` declares length "
                f"`{length}` past the end of the batch."
            )
        pos += 1  # attributes
        ts_delta, pos = _read_varint(payload, pos)
        off_delta, pos = _read_varint(payload, pos)
        klen, pos = _read_varint(payload, pos)
        key = None if klen < 0 else payload[pos : pos + klen]
        pos += max(klen, 0)
        vlen, pos = _read_varint(payload, pos)
        value = None if vlen < 0 else payload[pos : pos + vlen]
        timestamp = (
            header.max_timestamp if header.log_append_time else header.base_timestamp + ts_delta
        )
        out.append(
            Record(header.base_offset + off_delta, timestamp, key, value, payload[start:end])
        )
        pos = end
    return out


def first_at_or_after(batch: bytes, timestamp_ms: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record with timestamp >= `timestamp_ms`, or None
    when the batch cannot be decoded here."""
    try:
        for r in decode_records(batch):
            if r.timestamp >= timestamp_ms:
                return r.offset, r.timestamp
    except (UnsupportedCompressionTypeError, CorruptMessageError):
        return None
    return None


def _keyless_in_batch(batch: bytes | memoryview, count: int) -> list[int]:
    payload = records_payload(bytes(batch))
    out: list[int] = []
    pos = 0
    for index in range(count):
        length, pos = _read_varint(payload, pos)
        end = pos + length
        if length < 0 or end > len(payload):
            raise CorruptMessageError(
                f"Record {index} of the batch declares length `{length}` past the batch's end."
            )
        pos += 1  # attributes
        _, pos = _read_varint(payload, pos)  # timestampDelta
        _, pos = _read_varint(payload, pos)  # offsetDelta
        key_length, _ = _read_varint(payload, pos)
        if key_length < 0:
            out.append(index)
        pos = end
    return out


def keyless_records(records: bytes | memoryview) -> tuple[int, list[int]]:
    """`(batch number, record indexes)` of the first batch in `records` holding records
    without a key, or `(-1, [])` when every record has one. Control batches are skipped.

    Raises `UnsupportedCompressionTypeError` for a batch whose codec this Python cannot
    read (its keys cannot be checked) and `CorruptMessageError` for broken records.
    """
    view = memoryview(records)
    for number, header in enumerate(iter_batches(view)):
        if header.is_control:
            continue
        batch = view[header.position : header.position + header.size]
        missing = _keyless_in_batch(batch, header.records_count)
        if missing:
            return number, missing
    return -1, []
