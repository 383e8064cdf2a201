"""The cleaner checkpoint, `min.cleanable.dirty.ratio` and the bounded offset map."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from streams.broker.storage import LogConfig, LogManager, PartitionLog
from streams.broker.storage.cleaner import clean_log, compact_log, first_uncleanable_offset
from streams.broker.storage.cleaner_manager import CLEANER_CHECKPOINT_FILE
from streams.broker.storage.offset_map import ENTRY_BYTES, OffsetMap
from tests.unit.broker.storage.encoder import Rec, make_batch
from tests.unit.broker.storage.test_cleaner import records_of

NOW = 10**13
DAY = 24 * 3600 * 1000


def _passes(caplog: pytest.LogCaptureFixture) -> int:
    return sum("cleaned offsets" in r.getMessage() for r in caplog.records)


def _append_keys(log: PartitionLog, keys: range, value: bytes = b"x" * 40) -> None:
    for k in keys:
        log.append(make_batch([Rec(b"k%d" % k, value)], base_timestamp=1))


def test_checkpoint_and_dirty_ratio_decide_when_a_log_is_cleaned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="streams.broker.storage.cleaner_manager")
    logs = LogManager(tmp_path, clock=lambda: NOW).load()
    logs.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": "1000"})
    log = logs.get_log("t", 0)
    _append_keys(log, range(100))
    log.roll()
    assert logs.run_compaction(NOW) == 0  # unique keys: nothing to drop, but cleaned
    assert _passes(caplog) == 1
    end = log.active_segment.base_offset
    lines = (tmp_path / CLEANER_CHECKPOINT_FILE).read_text().splitlines()
    assert lines == ["0", "1", f"t 0 {end}"]  # Kafka's OffsetCheckpointFile format

    for _ in range(5):  # idle: the ratio is 0, no pass reads anything
        logs.run_compaction(NOW)
    assert _passes(caplog) == 1

    _append_keys(log, range(10))  # new values of 10 keys: well under half the log
    log.roll()
    assert logs.cleaner.dirty_ratio("t", 0, log, NOW) < 0.5
    logs.run_compaction(NOW)
    assert _passes(caplog) == 1

    _append_keys(log, range(10, 130))  # now most of the log is dirty
    log.roll()
    assert logs.cleaner.dirty_ratio("t", 0, log, NOW) > 0.5
    assert logs.run_compaction(NOW) > 0
    assert _passes(caplog) == 2
    values = {k: o for o, k, _ in records_of(log)}
    assert len(records_of(log)) == 130 and min(values.values()) >= end  # all old ones gone
    logs.close()

    again = LogManager(tmp_path, clock=lambda: NOW).load()  # the checkpoint is kept
    again.run_compaction(NOW)
    assert _passes(caplog) == 2
    again.delete_topic("t")
    assert (tmp_path / CLEANER_CHECKPOINT_FILE).read_text().splitlines() == ["0", "0"]
    again.close()


def test_a_small_dedupe_buffer_cleans_in_several_passes_to_the_same_result(
    tmp_path: Path,
) -> None:
    config = LogConfig(cleanup_policy="compact", segment_bytes=600)
    full = PartitionLog(tmp_path / "full", config=config)
    for rnd in range(3):
        for k in range(40):
            full.append(make_batch([Rec(b"k%d" % k, b"%d" % rnd)], base_timestamp=1))
    full.roll()
    full.close()
    shutil.copytree(tmp_path / "full", tmp_path / "bounded")
    full = PartitionLog(tmp_path / "full", config=config)
    bounded = PartitionLog(tmp_path / "bounded", config=config)
    compact_log(full, NOW)

    buffer = OffsetMap.slots_for(10, 10**9) * ENTRY_BYTES  # room for about 10 keys
    assert OffsetMap(buffer // ENTRY_BYTES).capacity < 40
    uncleanable = first_uncleanable_offset(bounded, bounded.segments, NOW)
    ends, first_dirty = [], 0
    for _ in range(50):  # bounded: a pass covers at least one batch
        stats = clean_log(bounded, NOW, first_dirty_offset=first_dirty, dedupe_buffer_bytes=buffer)
        assert stats.end_offset > first_dirty
        ends.append(stats.end_offset)
        first_dirty = stats.end_offset
        if first_dirty >= uncleanable:
            break
    assert len(ends) > 3 and ends[-1] == uncleanable  # the map filled, each pass went on
    assert records_of(bounded) == records_of(full)


def test_an_expired_tombstone_is_removed_without_new_writes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="streams.broker.storage.cleaner_manager")
    logs = LogManager(tmp_path, clock=lambda: NOW).load()
    logs.create_topic(
        "t",
        1,
        {"cleanup.policy": "compact", "segment.bytes": "1000", "delete.retention.ms": "1000"},
    )
    log = logs.get_log("t", 0)
    _append_keys(log, range(20))
    log.append(make_batch([Rec(b"k3", None)], base_timestamp=NOW))  # a fresh tombstone
    _append_keys(log, range(20, 40))
    log.roll()
    logs.run_compaction(NOW)
    assert (3, b"k3", None) not in records_of(log)
    assert [k for _, k, v in records_of(log) if v is None] == [b"k3"]
    logs.run_compaction(NOW + 500)  # not yet expired, and nothing new: no pass
    assert _passes(caplog) == 1
    logs.run_compaction(NOW + 2000)
    assert _passes(caplog) == 2
    assert [k for _, k, v in records_of(log) if v is None] == []
    assert len(records_of(log)) == 39
    logs.close()


def test_an_open_transaction_bounds_cleaning_and_costs_nothing_while_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="streams.broker.storage.cleaner_manager")
    logs = LogManager(tmp_path, clock=lambda: NOW).load()
    logs.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": "1000"})
    log = logs.get_log("t", 0)
    _append_keys(log, range(30))
    txn = make_batch(
        [Rec(b"k0", b"txn")], attributes=0x10, producer_id=5, producer_epoch=0, base_sequence=0
    )
    open_at = log.append(txn).base_offset
    _append_keys(log, range(30), b"y" * 40)  # every key again, after the open transaction
    log.roll()
    logs.run_compaction(NOW)
    assert _passes(caplog) == 1
    assert logs.cleaner.checkpoint("t", 0) == open_at  # Kafka's first unstable offset
    for _ in range(3):  # still open: nothing more to clean, and no pass tries
        logs.run_compaction(NOW)
    assert _passes(caplog) == 1

    log.append_control(5, 0, True, 1)
    log.roll()
    logs.run_compaction(NOW)
    assert _passes(caplog) == 2
    kept = [(k, v) for _, k, v in records_of(log) if k and k.startswith(b"k")]  # no marker
    assert sorted(kept) == sorted((b"k%d" % i, b"y" * 40) for i in range(30))
    logs.close()
