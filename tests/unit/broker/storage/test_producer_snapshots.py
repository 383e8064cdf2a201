"""Producer state snapshots (`<offset>.snapshot`) and the transaction index rebuilt on
recovery, on a real partition log reopened after clean and unclean closes."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from streams.broker.storage import LogConfig, PartitionLog
from streams.broker.storage.files import CLEAN_SHUTDOWN_FILE
from streams.broker.storage.producer_state import Duplicate, iter_headers, snapshot_offsets
from tests.unit.broker.storage.encoder import Rec, make_batch

CONFIG = LogConfig(segment_bytes=600)


def idem(pid: int, seq: int, n: int = 2, *, txn: bool = False) -> bytes:
    return make_batch(
        [Rec(b"k", b"v" * 20)] * n,
        attributes=0x10 if txn else 0,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
    )


def unclean_close(log: PartitionLog) -> None:
    """What a SIGKILL leaves: no clean-shutdown marker and no snapshot at the log end."""
    end = log.log_end_offset
    assert log.active_segment.size  # else the last roll's snapshot is the end's
    log.close()
    (log.directory / CLEAN_SHUTDOWN_FILE).unlink()
    (log.directory / f"{end:020d}.snapshot").unlink()


def _check(log: PartitionLog, data: bytes):
    (h,) = list(iter_headers(data))
    return log.producer_state.check(h)


def test_snapshots_at_rolls_and_close_restore_the_state_without_a_scan(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="streams.broker.storage.loader")
    log = PartitionLog(tmp_path, config=CONFIG)
    seq = 0
    for _ in range(20):
        log.append(idem(1, seq))
        seq += 2
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 3 and snapshot_offsets(tmp_path) == bases[1:]  # one per roll
    log.close()
    assert snapshot_offsets(tmp_path)[-1] == log.log_end_offset  # and one at the end

    log = PartitionLog(tmp_path, config=CONFIG)
    assert f"from {log.log_end_offset:020d}.snapshot, 0 batch(es) replayed" in caplog.text
    assert _check(log, idem(1, seq - 2)) == Duplicate(seq - 2)
    log.append(idem(1, seq))
    log.append(idem(1, seq + 2))
    active = log.active_segment.base_offset
    unclean_close(log)

    caplog.clear()
    log = PartitionLog(tmp_path, config=CONFIG)  # unclean: the roll snapshot + the tail
    assert f"from {active:020d}.snapshot" in caplog.text
    assert f"replayed from offset {active}:" in caplog.text
    assert _check(log, idem(1, seq + 2)) == Duplicate(seq + 2)
    assert _check(log, idem(1, seq)) == Duplicate(seq)
    log.close()


def test_an_unreadable_snapshot_falls_back_to_an_older_one(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, config=CONFIG)
    for seq in range(0, 24, 2):
        log.append(idem(1, seq))
    unclean_close(log)
    newest = snapshot_offsets(tmp_path)[-1]
    (tmp_path / f"{newest:020d}.snapshot").write_bytes(b"garbage")
    log = PartitionLog(tmp_path, config=CONFIG)
    assert _check(log, idem(1, 22)) == Duplicate(22)
    assert log.producer_state.entries[1].last_sequence == 23
    log.close()


def test_recovery_rebuilds_the_transaction_index_of_the_active_segment(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, config=CONFIG)
    for seq in range(0, 20, 2):  # a transaction that spans rolls
        log.append(idem(7, seq, txn=True))
    other = log.append(idem(8, 0, txn=True)).base_offset  # another producer's, still open
    marker = log.append_control(7, 0, False, 1)
    active = log.active_segment.base_offset
    assert active > 0  # the transaction began in an earlier segment
    assert log.aborted_transactions(0, marker + 1) == [(7, 0)]
    unclean_close(log)
    txnindex = tmp_path / f"{active:020d}.txnindex"
    txnindex.write_bytes(b"")  # the crash came before the entry reached the file

    log = PartitionLog(tmp_path, config=CONFIG)
    assert log.aborted_transactions(0, log.log_end_offset) == [(7, 0)]
    (entry,) = log.active_segment.txn_index.entries
    assert (entry.first_offset, entry.last_offset) == (0, marker)
    assert entry.last_stable_offset == other  # producer 8's transaction is still open
    assert log.producer_state.first_unstable_offset() == other
    log.close()


def test_truncation_forgets_the_producer_state_of_what_it_cut(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, config=CONFIG)
    for seq in range(0, 24, 2):
        log.append(idem(1, seq))
    end = log.truncate_to(8)
    assert end == 8
    assert all(o <= 8 for o in snapshot_offsets(tmp_path))
    assert log.producer_state.entries[1].last_sequence == 7
    assert _check(log, idem(1, 8)) is None  # the next batch after the cut is accepted
    log.close()
    log = PartitionLog(tmp_path, config=CONFIG)
    assert log.producer_state.entries[1].last_sequence == 7
    log.close()
