"""PartitionLog.read_records / FileRecords: the zero-copy fetch path, read across segments."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streams.broker.errors import (
    KafkaStorageError,
    OffsetOutOfRangeError,
)
from streams.broker.storage import (
    FileRecords,
    LogConfig,
    PartitionLog,
    validate_batches,
)
from tests.unit.broker.storage.encoder import kafka_python_records, value_batch


def _log(tmp_path: Path, segment_bytes: int = 4000) -> PartitionLog:
    log = PartitionLog(
        tmp_path, config=LogConfig(segment_bytes=segment_bytes, index_interval_bytes=256)
    )
    for _ in range(40):  # 40 batches of 394 B (15,760 B): 10 per 4000 B segment
        log.append(value_batch(3, size=100))
    assert len(log.segments) >= min(4, 15760 // segment_bytes)
    return log


def _fd_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_a_read_continues_into_the_next_segments_until_the_budget_is_used(tmp_path) -> None:
    log = _log(tmp_path)
    whole = log.read(0, 1 << 20)
    # every batch of every segment, in order, once
    headers = validate_batches(whole)
    assert headers[0].base_offset == 0 and headers[-1].next_offset == log.log_end_offset == 120
    assert [r[0] for r in kafka_python_records(whole)] == list(range(120))
    # a budget that ends inside the third segment: whole batches only, never above it
    part = log.read(3, 3000)
    assert 3000 - 400 < len(part) <= 3000
    assert validate_batches(part)[0].base_offset == 3
    assert whole.index(part) == headers[0].size  # from the batch holding offset 3


def test_max_offset_stops_the_read_in_a_later_segment(tmp_path) -> None:
    log = _log(tmp_path)
    data = log.read(0, 1 << 20, max_offset=75)
    assert validate_batches(data)[-1].next_offset == 75


def test_the_first_batch_is_returned_whole_even_over_the_budget(tmp_path) -> None:
    log = _log(tmp_path)
    data = log.read(30, 1)
    assert [h.base_offset for h in validate_batches(data)] == [30]


def test_read_records_holds_the_same_bytes_as_read(tmp_path) -> None:
    log = _log(tmp_path)
    for offset, budget, max_offset in ((0, 1 << 20, None), (7, 5000, None), (14, 9000, 100)):
        with log.read_records(offset, budget, max_offset=max_offset) as records:
            expected = log.read(offset, budget, max_offset=max_offset)
            assert len(records) == len(expected)
            assert bytes(records) == expected
            assert len(records.ranges) > 1  # these reads span segments
            # each range is whole batches of one segment
            assert all(r.size > 0 for r in records.ranges)
    with log.read_records(120, 1000) as at_end:
        assert len(at_end) == 0 and bytes(at_end) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read_records(121, 1000)


def test_file_records_stay_readable_after_the_segments_are_deleted(tmp_path) -> None:
    log = _log(tmp_path)
    records = log.read_records(0, 1 << 20)
    expected = log.read(0, 1 << 20)
    log.delete()  # closes every segment and removes the files
    assert not list(tmp_path.glob("*.log"))
    assert bytes(records) == expected
    fds = [r.fd for r in records.ranges]
    records.close()
    records.close()  # idempotent
    assert not any(_fd_open(fd) for fd in fds)
    with pytest.raises(ValueError):
        bytes(records)


def test_an_unsent_file_records_closes_its_descriptors_when_dropped(tmp_path) -> None:
    log = _log(tmp_path)
    records = log.read_records(0, 1 << 20)
    fds = [r.fd for r in records.ranges]
    assert all(_fd_open(fd) for fd in fds)
    del records
    assert not any(_fd_open(fd) for fd in fds)
    log.close()


def test_a_segment_truncated_under_a_file_records_is_an_error_not_short_data(tmp_path) -> None:
    log = _log(tmp_path, segment_bytes=1 << 20)
    records = log.read_records(0, 1 << 20)
    (r,) = records.ranges
    os.truncate(next(tmp_path.glob("*.log")), r.size // 2)
    with pytest.raises(KafkaStorageError, match="shrank"):
        bytes(records)
    records.close()
    log.close()


def test_file_records_of_nothing(tmp_path) -> None:
    records = FileRecords([])
    assert len(records) == 0 and bytes(records) == b""
    records.close()
