"""Compaction: last value per key with original offsets, tombstone expiry, transactions, crash swap."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.broker.storage import LogConfig, PartitionLog, validate_batches
from streams.broker.storage.cleaner import compact_log
from streams.broker.storage.files import CLEAN_SHUTDOWN_FILE
from tests.unit.broker.storage.encoder import (
    Rec,
    kafka_python_batch,
    kafka_python_records,
    make_batch,
)

DAY = 24 * 3600 * 1000


def records_of(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 10**8)
        if not data:
            break
        validate_batches(data)  # re-encoded batches must carry valid CRCs
        out += [(o, k, v) for o, _, k, v in kafka_python_records(data) if o >= offset]
        offset = validate_batches(data)[-1].next_offset
    return out


def compact_config(**extra: object) -> LogConfig:
    return LogConfig(cleanup_policy="compact", segment_bytes=700, **extra)  # type: ignore[arg-type]


keys = st.sampled_from([b"a", b"b", b"c", b"d", b"e", None])
values = st.one_of(st.binary(min_size=1, max_size=30), st.none())


@settings(max_examples=30, deadline=None)
@given(
    batches=st.lists(
        st.lists(st.tuples(keys, values), min_size=1, max_size=5), min_size=2, max_size=30
    )
)
def test_compaction_keeps_the_last_value_per_key_at_its_offset(batches) -> None:
    with tempfile.TemporaryDirectory() as d:
        log = PartitionLog(d, config=compact_config(delete_retention_ms=DAY))
        now = 10 * DAY
        for i, batch in enumerate(batches):
            ts = now - 2 * DAY + i if i % 2 else now - 1000 + i  # half the batches are old
            log.append(make_batch([Rec(k, v) for k, v in batch], base_timestamp=ts))
        before = records_of(log)
        stamps = {}
        offset = 0
        for i, batch in enumerate(batches):
            for _ in batch:
                stamps[offset] = now - 2 * DAY + i if i % 2 else now - 1000 + i
                offset += 1
        dirty_end = log.active_segment.base_offset
        compact_log(log, now)
        cleanable = [r for r in before if r[0] < dirty_end]
        last = {k: o for o, k, _ in cleanable if k is not None}
        expected = [
            (o, k, v)
            for o, k, v in cleanable
            if k is None
            or (last[k] == o and not (v is None and stamps_max(stamps, o, batches) < now - DAY))
        ] + [r for r in before if r[0] >= dirty_end]
        assert records_of(log) == expected
        assert log.log_end_offset == len(stamps)
        # Idempotent, and the same after reopening (clean and unclean).
        compact_log(log, now)
        assert records_of(log) == expected
        log.close()
        (Path(d) / CLEAN_SHUTDOWN_FILE).unlink()
        log = PartitionLog(d, config=compact_config(delete_retention_ms=DAY))
        assert records_of(log) == expected
        log.close()


def stamps_max(stamps: dict[int, int], offset: int, batches: list) -> int:
    """The max timestamp of the batch that holds `offset` (tombstone expiry is per batch)."""
    start = 0
    for b in batches:
        if start <= offset < start + len(b):
            return max(stamps[o] for o in range(start, start + len(b)))
        start += len(b)
    raise AssertionError(offset)


def test_gzip_batches_are_compacted_and_reencoded(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, config=compact_config())
    for i in range(12):
        log.append(
            kafka_python_batch(
                [(b"k%d" % (j % 3), b"v%d-%d" % (i, j) * 20, 1000) for j in range(6)], compression=1
            )
        )
    dirty_end = log.active_segment.base_offset
    compact_log(log, 10**6)
    got = records_of(log)
    survivors = [r for r in got if r[0] < dirty_end]
    assert sorted(k for _, k, _ in survivors) == [b"k0", b"k1", b"k2"]
    assert all(v.startswith(b"v%d-" % (o // 6)) for o, _, v in survivors)


def test_min_compaction_lag_and_high_watermark_limit_the_cleanable_range(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, config=compact_config(min_compaction_lag_ms=5000))
    for i in range(20):
        log.append(make_batch([Rec(b"same", b"%d" % i)] * 3, base_timestamp=i * 1000))
    assert (
        compact_log(log, 4000) == 0
    )  # every segment has a batch newer than 4000 - 5000... none old enough
    rewritten = compact_log(log, 12_000)
    assert rewritten >= 1
    got = records_of(log)
    assert [v for _, k, v in got if k == b"same"][-1] == b"19"


def test_transactions_aborted_data_goes_committed_is_compacted_open_stays(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, config=compact_config())

    def txn(pid: int, key: bytes, value: bytes) -> bytes:
        return make_batch(
            [Rec(key, value)], attributes=0x10, producer_id=pid, producer_epoch=0, base_sequence=0
        )

    a = log.append(txn(1, b"k", b"aborted")).base_offset
    log.append(txn(2, b"k", b"committed"))
    log.append(txn(3, b"k", b"open"))
    marker = log.append_control(1, 0, False, 1)
    log.record_aborted(1, a, marker)
    log.append_control(2, 0, True, 1)
    for i in range(10):
        log.append(make_batch([Rec(b"filler%d" % i, b"x" * 60)], base_timestamp=1))
    log.roll()
    compact_log(log, 2 * 10**12)
    got = records_of(log)
    values = [v for _, k, v in got if k == b"k"]
    assert values == [b"committed", b"open"]
    control = [h for h in validate_batches(log.read(marker, 10**6)) if h.is_control]
    assert len(control) == 2  # markers are kept
    assert log.aborted_transactions(0, 100) == [(1, 0)]


def test_interrupted_swap_is_rolled_back_or_completed(tmp_path: Path) -> None:
    original = tmp_path / "original"
    log = PartitionLog(original, config=compact_config())
    for i in range(30):
        log.append(make_batch([Rec(b"k%d" % (i % 4), b"value-%d" % i * 5)], base_timestamp=1))
    log.roll()
    full = records_of(log)
    compact_log(log, 10**6)  # segment by segment: they shrink (some to nothing) ...
    before = records_of(log)
    segments_before = [s.base_offset for s in log.segments]
    log.close()
    assert before == [r for r in full if r[0] >= 26] and len(segments_before) == 6
    compacted = tmp_path / "compacted"
    shutil.copytree(original, compacted)
    log = PartitionLog(compacted, config=compact_config())
    assert compact_log(log, 10**6) == 5  # ... so the next run merges the small ones
    assert records_of(log) == before
    segments_after = [s.base_offset for s in log.segments]
    log.close()
    assert segments_after == [0, 30]
    cleaned_log = (compacted / f"{0:020d}.log").read_bytes()
    replaced = segments_before[:-1]

    for committed in (False, True):
        crash = tmp_path / f"crash-{committed}"
        shutil.copytree(original, crash)
        (crash / CLEAN_SHUTDOWN_FILE).unlink()
        (crash / f"{0:020d}.log.cleaned").write_bytes(cleaned_log)
        renamed = replaced if committed else replaced[1:]  # renames go last segment first
        for base in renamed:
            os.replace(crash / f"{base:020d}.log", crash / f"{base:020d}.log.deleted")
            (crash / f"{base:020d}.index").unlink(missing_ok=True)
        log = PartitionLog(crash, config=compact_config())
        assert records_of(log) == before
        assert [s.base_offset for s in log.segments] == (
            segments_after if committed else segments_before
        )
        log.close()
        assert not [p for p in crash.iterdir() if p.name.endswith((".cleaned", ".deleted"))]
