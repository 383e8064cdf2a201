"""Kafka RecordBatch v2 (magic 2) headers: parse, validate, patch. No record decoding.

Wire layout of one batch (big-endian), 61 header bytes then the records:

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
    recordsCount int32 | records...

`batchLength` counts the bytes after itself (so a batch is `batchLength + 12`
bytes). The CRC-32C covers `attributes` to the end, so assigning `baseOffset`
(and `partitionLeaderEpoch`) needs no recompute; setting `maxTimestamp` or the
timestamp type does (`set_log_append_time`).

Public helpers: `BatchHeader`, `parse_batch_header(buf, pos=0)`,
`iter_batches(buf)`, `validate_batches(buf) -> list[BatchHeader]` (raises
`CorruptMessageError`), `assign_offsets`, `set_log_append_time`,
`build_control_batch`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from crc32c import crc32c

from streams.broker.errors import CorruptMessageError

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
MAGIC = 2
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
PARTITION_LEADER_EPOCH_OFFSET = 12

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # 1 = LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_LEN = struct.Struct(">qi")
_CRC = struct.Struct(">I")
_ATTR = struct.Struct(">h")


@dataclass(slots=True)  # not frozen: a frozen dataclass is much slower to build, per batch
class BatchHeader:
    """The 61-byte header of one record batch, plus where it sits in its buffer."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int = 0

    @property
    def size(self) -> int:
        """Bytes of the whole batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        """0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & COMPRESSION_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)


def parse_batch_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch at `pos`; no validation beyond having 61 bytes."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptMessageError(
            f"Record batch at byte `{pos}` is truncated: `{len(buf) - pos}` bytes left, "
            f"a batch header needs {HEADER_SIZE}."
        )
    return BatchHeader(*HEADER.unpack_from(buf, pos), position=pos)


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[BatchHeader]:
    """Headers of the concatenated batches in `buf`, without CRC checks.

    Stops at the end of `buf`; raises `CorruptMessageError` on a truncated batch.
    """
    pos = 0
    end = len(buf)
    while pos < end:
        header = parse_batch_header(buf, pos)
        size = header.size
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + size > end:
            raise CorruptMessageError(
                f"Record batch at byte `{pos}` declares batchLength `{header.batch_length}` "
                f"but {end - pos - LOG_OVERHEAD} bytes follow; the batch is truncated or corrupt."
            )
        yield header
        pos += size


def check_batch(buf: bytes | bytearray | memoryview, pos: int, end: int) -> BatchHeader:
    """Validate the batch at `pos` (lengths, magic, CRC, offsets) and return its header."""
    if end - pos < HEADER_SIZE:
        raise CorruptMessageError(
            f"Record batch at byte `{pos}` is truncated: `{end - pos}` bytes left, "
            f"a batch header needs {HEADER_SIZE}."
        )
    header = BatchHeader(*HEADER.unpack_from(buf, pos), position=pos)
    size = header.batch_length + LOG_OVERHEAD
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + size > end:
        raise CorruptMessageError(
            f"Record batch at byte `{pos}` declares batchLength `{header.batch_length}` "
            f"but {end - pos - LOG_OVERHEAD} bytes follow; the batch is truncated or corrupt."
        )
    if header.magic != MAGIC:
        raise CorruptMessageError(
            f"Record batch at byte `{pos}` has magic `{header.magic}`; only magic 2 "
            "(RecordBatch v2, Kafka >= 0.11) is stored. Upgrade the client or its api version."
        )
    actual = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])
    if actual != header.crc:
        raise CorruptMessageError(
            f"Record batch at byte `{pos}` has CRC `{header.crc}` but its content hashes to "
            f"`{actual}`; the batch was corrupted in transit or on disk."
        )
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise CorruptMessageError(
            f"Record batch at byte `{pos}` has lastOffsetDelta `{header.last_offset_delta}` "
            f"and recordsCount `{header.records_count}`; both must be >= 0."
        )
    return header


def validate_batches(buf: bytes | bytearray | memoryview) -> list[BatchHeader]:
    """Check every batch in `buf` and return their headers; raises `CorruptMessageError`."""
    end = len(buf)
    if end == 0:
        raise CorruptMessageError(
            "Record set is empty; a produce request needs at least one batch."
        )
    headers = []
    pos = 0
    while pos < end:
        header = check_batch(buf, pos, end)
        headers.append(header)
        pos += header.batch_length + LOG_OVERHEAD
    return headers


def assign_offsets(buf: bytearray | memoryview, headers: list[BatchHeader], first: int) -> int:
    """Write consecutive base offsets starting at `first` into `buf`; returns the next offset.

    The CRC does not cover baseOffset, so the batches stay valid.
    """
    offset = first
    pack = _I64.pack_into
    for h in headers:
        pack(buf, h.position, offset)
        offset += h.last_offset_delta + 1
    return offset


def set_log_append_time(
    buf: bytearray | memoryview, headers: list[BatchHeader], now_ms: int
) -> None:
    """Mark every batch as LogAppendTime with maxTimestamp `now_ms` and recompute its CRC."""
    view = memoryview(buf)
    for h in headers:
        pos = h.position
        _ATTR.pack_into(buf, pos + ATTRIBUTES_OFFSET, h.attributes | TIMESTAMP_TYPE_BIT)
        _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, now_ms)
        crc = crc32c(view[pos + ATTRIBUTES_OFFSET : pos + h.size])
        _CRC.pack_into(buf, pos + CRC_OFFSET, crc)


def write_buffers(
    records: bytes | bytearray | memoryview,
    headers: list[BatchHeader],
    first_offset: int,
    *,
    log_append_time_ms: int | None = None,
) -> list[bytes | memoryview]:
    """The buffers to `pwritev` for `records` with offsets from `first_offset`, no copy.

    Each batch becomes its new 8-byte baseOffset plus a view of the received
    bytes after it; with `log_append_time_ms` the 61-byte header is rebuilt
    (timestamp type, maxTimestamp, CRC continued over the untouched records).
    `headers` are updated in place to what is written.
    """
    view = memoryview(records)
    out: list[bytes | memoryview] = []
    offset = first_offset
    pack_offset = _I64.pack
    for h in headers:
        pos = h.position
        end = pos + h.batch_length + LOG_OVERHEAD
        h.base_offset = offset
        if log_append_time_ms is None:
            out.append(pack_offset(offset))
            out.append(view[pos + 8 : end])
        else:
            h.attributes |= TIMESTAMP_TYPE_BIT
            h.max_timestamp = log_append_time_ms
            tail = HEADER.pack(
                offset,
                h.batch_length,
                h.partition_leader_epoch,
                MAGIC,
                0,
                h.attributes,
                h.last_offset_delta,
                h.base_timestamp,
                h.max_timestamp,
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                h.records_count,
            )
            body = view[pos + HEADER_SIZE : end]
            h.crc = crc32c(body, crc32c(tail[ATTRIBUTES_OFFSET:]))
            out.append(tail[:CRC_OFFSET] + _CRC.pack(h.crc) + tail[ATTRIBUTES_OFFSET:])
            out.append(body)
        offset += h.last_offset_delta + 1
    return out


def _varint(value: int) -> bytes:
    """Zig-zag varint as in Kafka records."""
    v = (value << 1) ^ (value >> 63)
    out = bytearray()
    while v & ~0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def encode_batch(
    records: bytes,
    *,
    records_count: int,
    last_offset_delta: int,
    base_offset: int = 0,
    attributes: int = 0,
    base_timestamp: int = -1,
    max_timestamp: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A batch around already-encoded `records` (used for control batches and compaction)."""
    body = (
        _ATTR.pack(attributes)
        + struct.pack(
            ">iqqqhii",
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            records_count,
        )
        + records
    )
    crc = crc32c(body)
    batch_length = 4 + 1 + 4 + len(body)
    return (
        _LEN.pack(base_offset, batch_length)
        + struct.pack(">ibI", partition_leader_epoch, MAGIC, crc)
        + body
    )


def build_control_batch(
    producer_id: int,
    producer_epoch: int,
    *,
    commit: bool,
    timestamp_ms: int,
    coordinator_epoch: int = 0,
) -> bytes:
    """A transaction marker: a control+transactional batch with one control record.

    Key = version int16 0 + type int16 (0 abort, 1 commit); value = version int16 0
    + coordinatorEpoch int32.
    """
    key = struct.pack(">hh", 0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = struct.pack(">hi", 0, coordinator_epoch)
    body = (
        b"\x00"  # record attributes
        + _varint(0)  # timestampDelta
        + _varint(0)  # offsetDelta
        + _varint(len(key))
        + key
        + _varint(len(value))
        + value
        + _varint(0)  # headers
    )
    record = _varint(len(body)) + body
    return encode_batch(
        record,
        records_count=1,
        last_offset_delta=0,
        attributes=CONTROL_BIT | TRANSACTIONAL_BIT,
        base_timestamp=timestamp_ms,
        max_timestamp=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )
