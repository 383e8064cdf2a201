"""RecordBatch v2 header codec: round trips against an independent encoder and kafka-python."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.broker.errors import (
    CorruptMessageError,
)
from streams.broker.storage import (
    build_control_batch,
    decode_records,
    iter_batches,
    parse_batch_header,
    validate_batches,
)
from streams.broker.storage.batch import (
    CONTROL_BIT,
    TRANSACTIONAL_BIT,
    assign_offsets,
    set_log_append_time,
)
from tests.unit.broker.storage.encoder import (
    Rec,
    kafka_python_batch,
    kafka_python_records,
    make_batch,
)

i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
opt_bytes = st.one_of(st.none(), st.binary(max_size=40))
records = st.lists(
    st.builds(Rec, opt_bytes, opt_bytes, st.integers(0, 10**6)), min_size=1, max_size=8
)


@settings(max_examples=60, deadline=None)
@given(
    recs=records,
    base_offset=st.integers(0, 2**62),
    base_ts=st.integers(0, 2**40),
    attributes=st.sampled_from([0, TRANSACTIONAL_BIT]),
    pid=i64,
    epoch=i16,
    seq=i32,
    ple=i32,
)
def test_header_round_trip(recs, base_offset, base_ts, attributes, pid, epoch, seq, ple) -> None:
    data = make_batch(
        recs,
        base_offset=base_offset,
        base_timestamp=base_ts,
        attributes=attributes,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        partition_leader_epoch=ple,
    )
    (h,) = validate_batches(data)
    assert h == parse_batch_header(data)
    assert (h.base_offset, h.producer_id, h.producer_epoch, h.base_sequence) == (
        base_offset,
        pid,
        epoch,
        seq,
    )
    assert h.partition_leader_epoch == ple
    assert h.size == len(data)
    assert h.records_count == len(recs) and h.last_offset == base_offset + len(recs) - 1
    assert h.is_transactional == bool(attributes) and not h.is_control
    assert h.max_timestamp == base_ts + max(r.timestamp_delta for r in recs)
    decoded = decode_records(data)
    assert [(r.key, r.value) for r in decoded] == [(r.key, r.value) for r in recs]
    assert [r.offset for r in decoded] == list(range(base_offset, base_offset + len(recs)))


@settings(max_examples=40, deadline=None)
@given(recs=st.lists(records, min_size=1, max_size=5), first=st.integers(0, 2**40))
def test_assign_offsets_keeps_batches_valid(recs, first) -> None:
    data = bytearray(b"".join(make_batch(r, base_offset=777) for r in recs))
    headers = validate_batches(data)
    end = assign_offsets(data, headers, first)
    assert end == first + sum(len(r) for r in recs)
    again = validate_batches(data)  # CRC does not cover baseOffset
    assert [h.base_offset for h in again] == [
        first + sum(len(r) for r in recs[:i]) for i in range(len(recs))
    ]
    expected_keys = [(r.key, r.value) for rs in recs for r in rs]
    got = kafka_python_records(bytes(data))
    assert [(k, v) for _, _, k, v in got] == expected_keys
    assert [o for o, _, _, _ in got] == list(range(first, end))


@settings(max_examples=40, deadline=None)
@given(recs=records, pos=st.data())
def test_any_flipped_byte_under_the_crc_is_detected(recs, pos) -> None:
    data = bytearray(make_batch(recs))
    i = pos.draw(st.integers(21, len(data) - 1))
    data[i] ^= pos.draw(st.integers(1, 255))
    with pytest.raises(CorruptMessageError, match="CRC"):
        validate_batches(data)


def test_truncated_and_bad_magic_batches_are_rejected() -> None:
    data = make_batch([Rec(b"k", b"v")])
    with pytest.raises(CorruptMessageError, match="truncated"):
        validate_batches(data[:-1])
    with pytest.raises(CorruptMessageError, match="truncated"):
        validate_batches(data[:30])
    with pytest.raises(CorruptMessageError, match="truncated"):
        list(iter_batches(data + data[:20]))
    bad = bytearray(data)
    bad[16] = 1
    with pytest.raises(CorruptMessageError, match="magic `1`"):
        validate_batches(bad)
    with pytest.raises(CorruptMessageError, match="empty"):
        validate_batches(b"")


def test_log_append_time_recomputes_the_crc() -> None:
    data = bytearray(make_batch([Rec(b"k", b"v", 3)], base_timestamp=1000))
    headers = validate_batches(data)
    set_log_append_time(data, headers, 99_999)
    (h,) = validate_batches(data)
    assert h.log_append_time and h.max_timestamp == 99_999
    assert [r.timestamp for r in decode_records(bytes(data))] == [99_999]
    assert kafka_python_records(bytes(data))[0][1] == 99_999


def test_kafka_python_batches_validate_including_gzip() -> None:
    recs = [(b"key%d" % i, b"value-" * 50, 1000 + i) for i in range(20)]
    for compression in (0, 1):
        data = kafka_python_batch(recs, compression=compression)
        (h,) = validate_batches(data)
        assert h.compression == compression
        assert [(r.key, r.value, r.timestamp) for r in decode_records(data)] == recs


def test_control_batch_layout() -> None:
    data = build_control_batch(42, 3, commit=True, timestamp_ms=5000, coordinator_epoch=7)
    (h,) = validate_batches(data)
    assert h.attributes & CONTROL_BIT and h.attributes & TRANSACTIONAL_BIT
    assert (h.producer_id, h.producer_epoch, h.records_count, h.max_timestamp) == (42, 3, 1, 5000)
    (r,) = decode_records(data)
    assert r.key == b"\x00\x00\x00\x01"  # version 0, type 1 = commit
    assert r.value == b"\x00\x00\x00\x00\x00\x07"  # version 0, coordinator epoch 7
    abort = decode_records(build_control_batch(42, 3, commit=False, timestamp_ms=5000))[0]
    assert abort.key == b"\x00\x00\x00\x00"
