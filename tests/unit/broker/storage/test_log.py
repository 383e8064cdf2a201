"""PartitionLog: append/read round trips, rolls, indexes, timestamps, truncation, transactions."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.broker.errors import (
    CorruptMessageError,
    InvalidTxnStateError,
    KafkaStorageError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    for_code,
)
from streams.broker.storage import (
    LogConfig,
    PartitionLog,
    decode_records,
    iter_batches,
    validate_batches,
)
from tests.unit.broker.storage.encoder import Rec, kafka_python_records, make_batch, value_batch


def offsets_of(data: bytes) -> list[int]:
    return [
        r.offset
        for h in iter_batches(data)
        for r in decode_records(data[h.position : h.position + h.size])
    ]


def read_all(log: PartitionLog, start: int | None = None) -> list[tuple[int, bytes | None]]:
    """Every record from `start` to the end, fetching like a consumer does."""
    offset = log.log_start_offset if start is None else start
    out = []
    while offset < log.log_end_offset:
        data = log.read(offset, 3000)
        assert data, f"empty read at {offset}"
        for r in kafka_python_records(data):
            if r[0] >= offset:
                out.append((r[0], r[3]))
        offset = validate_batches(data)[-1].next_offset
    return out


batch_sizes = st.lists(st.integers(1, 12), min_size=1, max_size=25)


@settings(max_examples=25, deadline=None)
@given(
    sizes=batch_sizes, value_size=st.integers(0, 300), seg=st.integers(600, 5000), probe=st.data()
)
def test_append_read_round_trip(sizes, value_size, seg, probe) -> None:
    with tempfile.TemporaryDirectory() as d:
        log = PartitionLog(d, config=LogConfig(segment_bytes=seg, index_interval_bytes=256))
        sent = []
        for n in sizes:
            data = value_batch(n, size=value_size)
            info = log.append(data)
            assert info.last_offset - info.base_offset + 1 == n
            sent.append(data)
        total = sum(sizes)
        assert log.log_end_offset == total and log.high_watermark == total
        values = [r.value for b in sent for r in decode_records(b)]
        assert read_all(log) == list(enumerate(values))
        # Any offset: the first batch returned contains it; whole batches; at least one.
        offset = probe.draw(st.integers(0, total - 1))
        max_bytes = probe.draw(st.integers(1, 4000))
        data = log.read(offset, max_bytes)
        headers = validate_batches(data)
        assert headers[0].base_offset <= offset <= headers[0].last_offset
        assert len(headers) == 1 or len(data) <= max_bytes
        limit = probe.draw(st.integers(offset, total))
        bounded = log.read(offset, 10**6, max_offset=limit)
        assert all(h.last_offset < limit for h in iter_batches(bounded))
        # Reopening (clean and unclean) gives the same log.
        log.close()
        for clean in (True, False):
            if not clean:
                (Path(d) / ".clean-shutdown").unlink(missing_ok=True)
            log = PartitionLog(d, config=LogConfig(segment_bytes=seg, index_interval_bytes=256))
            assert log.log_end_offset == total
            assert read_all(log) == list(enumerate(values))
            log.close()


def test_several_batches_in_one_append_get_consecutive_offsets(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path)
    log.append(value_batch(2))
    info = log.append(value_batch(3) + value_batch(4) + value_batch(1))
    assert (info.base_offset, info.last_offset, len(info.batches)) == (2, 9, 3)
    assert offsets_of(log.read(0, 10**6)) == list(range(10))
    log.close()


def test_segments_roll_by_size_and_time(tmp_path: Path) -> None:
    batch = value_batch(5, size=200)
    log = PartitionLog(tmp_path, config=LogConfig(segment_bytes=len(batch) * 3, segment_ms=1000))
    for _ in range(9):
        log.append(batch, timestamp_ms=10_000)
    assert [s.base_offset for s in log.segments] == [0, 15, 30]
    names = sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".log")
    assert names == [
        "00000000000000000000.log",
        "00000000000000000015.log",
        "00000000000000000030.log",
    ]
    log.append(batch, timestamp_ms=10_500)
    assert len(log.segments) == 4  # size
    log.append(batch, timestamp_ms=11_499)
    assert len(log.segments) == 4
    log.append(batch, timestamp_ms=11_500)
    assert [s.base_offset for s in log.segments][-1] == 55  # segment.ms since its first append
    assert log.roll() == 60 and log.roll() == 60  # an empty active segment is not rolled again
    log.close()


def test_indexes_are_rebuilt_after_their_files_are_deleted(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=20_000, index_interval_bytes=500)
    log = PartitionLog(tmp_path, config=config)
    for i in range(60):
        log.append(value_batch(3, size=150, ts=1000 + i * 10))
    before = {o: log.read(o, 2000) for o in range(0, 180, 7)}
    ts_before = [log.offset_for_timestamp(t) for t in (0, 1005, 1302, 1591, 5000)]
    log.close()
    index_sizes = {p.name: p.stat().st_size for p in tmp_path.glob("*.index")}
    assert len(index_sizes) >= 2 and all(index_sizes.values())
    for p in [*tmp_path.glob("*.index"), *tmp_path.glob("*.timeindex")]:
        p.unlink()
    log = PartitionLog(tmp_path, config=config)
    assert {p.name: p.stat().st_size for p in tmp_path.glob("*.index")} == index_sizes
    assert {o: log.read(o, 2000) for o in before} == before
    assert [log.offset_for_timestamp(t) for t in (0, 1005, 1302, 1591, 5000)] == ts_before
    assert ts_before[1] == (3, 1010) and ts_before[-1] is None
    log.close()


def test_garbage_index_is_detected_and_rebuilt(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=8_000, index_interval_bytes=300)
    log = PartitionLog(tmp_path, config=config)
    for _ in range(40):
        log.append(value_batch(2, size=120))
    expected = read_all(log)
    log.close()
    first = sorted(tmp_path.glob("*.index"))[0]
    first.write_bytes(b"\x00\x00\x00\x05\x00\x00\x00\x11" * 3)  # not increasing, wrong positions
    log = PartitionLog(tmp_path, config=config)
    assert read_all(log) == expected
    log.close()


def test_read_out_of_range_and_at_the_end(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path)
    log.append(value_batch(3))
    assert log.read(3, 100) == b""
    with pytest.raises(OffsetOutOfRangeError, match=r"offset `4` is outside.*\[0, 3\]"):
        log.read(4, 100)
    log.close()


def test_invalid_appends_are_rejected_and_leave_the_log_unchanged(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, config=LogConfig(max_message_bytes=2000))
    good = value_batch(2)
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptMessageError):
        log.append(good + bytes(bad))
    with pytest.raises(MessageTooLargeError, match="max.message.bytes"):
        log.append(value_batch(30, size=100))
    assert log.log_end_offset == 0 and log.active_segment.size == 0
    log.close()


def test_log_append_time(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, config=LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append(value_batch(2, ts=5), timestamp_ms=123_456)
    assert info.log_append_time_ms == 123_456 and info.max_timestamp == 123_456
    assert [r[1] for r in kafka_python_records(log.read(0, 10_000))] == [123_456, 123_456]
    log.close()


def test_truncate_and_delete_records(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=2000)
    log = PartitionLog(tmp_path, config=config)
    for _ in range(20):
        log.append(value_batch(2, size=100))
    assert [seg.base_offset for seg in log.segments] == [0, 14, 28]
    assert log.truncate_to(31) == 30  # whole batches: the one holding 31 goes
    assert log.log_end_offset == 30 and read_all(log)[-1][0] == 29
    log.append(value_batch(2))
    assert offsets_of(log.read(30, 10**6)) == [30, 31]
    assert log.delete_records_before(17) == 17
    assert log.segments[0].base_offset == 14  # the segment holding 17 stays; [0, 14) is gone
    assert not (tmp_path / "00000000000000000000.log").exists()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(16, 100)
    assert read_all(log)[0][0] == 17
    log.close()
    log = PartitionLog(tmp_path, config=config)
    assert (log.log_start_offset, log.log_end_offset) == (17, 32)
    assert log.truncate_to(0) == 0 and log.log_end_offset == 0 and len(log.segments) == 1
    log.close()


def test_sync_durability_high_watermark_waits_for_flush(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, config=LogConfig(durability="sync"))
    log.append(value_batch(4))
    assert (log.log_end_offset, log.high_watermark) == (4, 0)
    assert log.dirty and log.flush_due(0)
    log.flush()
    assert log.high_watermark == 4 and not log.dirty
    log.close()


def test_transaction_markers_and_aborted_index(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, config=LogConfig(segment_bytes=1500))
    txn = make_batch(
        [Rec(b"k", b"v")] * 3, attributes=0x10, producer_id=7, producer_epoch=1, base_sequence=0
    )
    first = log.append(txn).base_offset
    log.append(value_batch(5))
    marker = log.append_control(7, 1, False, 2000)
    log.record_aborted(7, first, marker)
    commit_first = log.append(txn).base_offset
    commit = log.append_control(7, 1, True, 2001)
    assert (first, marker, commit_first, commit) == (0, 8, 9, 12)
    assert log.aborted_transactions(0, 13) == [(7, 0)]
    assert log.aborted_transactions(9, 13) == []
    assert log.aborted_transactions(0, 0) == []
    (h,) = validate_batches(log.read(marker, 100))
    assert h.is_control and h.producer_id == 7
    log.close()
    log = PartitionLog(tmp_path, config=LogConfig(segment_bytes=1500))
    assert log.aborted_transactions(2, 100) == [(7, 0)]
    log.close()


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="counts descriptors via /proc")
def test_one_file_descriptor_per_segment(tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    log = PartitionLog(tmp_path, config=LogConfig(segment_bytes=1000, index_interval_bytes=100))
    for _ in range(40):
        log.append(value_batch(2, size=200))
    assert len(log.segments) >= 20
    assert len(os.listdir("/proc/self/fd")) - before == len(log.segments)
    log.close()
    assert len(os.listdir("/proc/self/fd")) == before


def test_closed_log_and_bad_transaction_entries_raise_coded_errors(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path)
    with pytest.raises(InvalidTxnStateError, match="first offset `5` after its marker `3`"):
        log.record_aborted(1, 5, 3)
    log.close()
    with pytest.raises(KafkaStorageError, match="is closed") as err:
        log.append(value_batch(1))
    assert err.value.errno == 56 and for_code(56) is KafkaStorageError
    assert for_code(2) is CorruptMessageError
    with pytest.raises(ValueError, match="`12345`"):
        for_code(12345)


@settings(max_examples=30, deadline=None)
@given(
    batches=st.lists(
        st.lists(st.integers(0, 10_000), min_size=1, max_size=6), min_size=1, max_size=40
    ),
    targets=st.lists(st.integers(-1, 10_100), min_size=1, max_size=10),
)
def test_offset_for_timestamp_matches_a_linear_search(batches, targets) -> None:
    """Timestamps need not increase: the answer is the first record at or after the target."""
    with tempfile.TemporaryDirectory() as d:
        log = PartitionLog(d, config=LogConfig(segment_bytes=1500, index_interval_bytes=200))
        stamps: list[int] = []
        for ts in batches:
            base = min(ts)
            log.append(
                make_batch([Rec(b"k", b"v" * 30, t - base) for t in ts], base_timestamp=base)
            )
            stamps += ts
        for target in targets:
            expected = next(((o, t) for o, t in enumerate(stamps) if t >= target), None)
            assert log.offset_for_timestamp(target) == expected
        log.close()
