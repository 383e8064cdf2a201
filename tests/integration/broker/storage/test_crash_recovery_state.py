"""What a partition knows beyond its records survives SIGKILL: the transaction index and
the producer state. A real broker process is killed and restarted on the same data dir;
real clients write before and read after.

- A crash between an abort marker and its `.txnindex` entry (simulated: the index of
  the segment holding the marker is emptied after the kill) must not show the aborted
  records to read_committed readers: recovery rebuilds the index from the log.
- The producer state comes back from the `<offset>.snapshot` written at the last roll
  plus the segment written since, not from a scan of the partition: a producer's retry
  of a batch written before that roll is still recognised as a duplicate.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from streams.broker.launcher import BrokerProcess
from tests.integration.broker.coordinator.test_idempotence import _init_pid, _produce
from tests.support.broker_clients import create_topic, produce, produce_transactions, read_all
from tests.support.broker_wire import Wire, producer_batch

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _segment_files(partition_dir: Path, suffix: str) -> list[Path]:
    return sorted(partition_dir.glob(f"{'[0-9]' * 20}{suffix}"))


def test_aborted_records_stay_hidden_when_the_crash_lost_their_index_entry(
    tmp_path: Path, unique
) -> None:
    topic = unique("txn-crash")
    data_dir = tmp_path / "data"
    with BrokerProcess(data_dir, log_file=tmp_path / "broker-1.log") as broker:
        create_topic(broker.bootstrap, topic)
        produce_transactions(
            broker.bootstrap,
            unique("txn"),
            topic,
            [
                ([("k", "committed-1")], True),
                ([("k", "aborted-1"), ("k", "aborted-2")], False),
                ([("k", "committed-2")], True),
            ],
        )
        broker.kill()
    (txnindex,) = _segment_files(data_dir / f"{topic}-0", ".txnindex")
    assert txnindex.stat().st_size > 0  # the abort's entry, written with its marker
    txnindex.write_bytes(b"")  # ... as if the crash came before it reached the file

    with BrokerProcess(data_dir, log_file=tmp_path / "broker-2.log") as again:
        everything = read_all(again.bootstrap, topic, 1, isolation="read_uncommitted")
        assert [v for _, _, v in everything] == [
            b"committed-1",
            b"aborted-1",
            b"aborted-2",
            b"committed-2",
        ]
        committed = read_all(again.bootstrap, topic, 1, isolation="read_committed")
        assert [v for _, _, v in committed] == [b"committed-1", b"committed-2"]


def test_producer_state_returns_from_the_last_roll_snapshot_after_sigkill(
    tmp_path: Path, unique
) -> None:
    topic = unique("idem-crash")
    data_dir = tmp_path / "data"
    with BrokerProcess(data_dir, log_file=tmp_path / "broker-1.log") as broker:
        create_topic(broker.bootstrap, topic, config={"segment.bytes": "16384"})
        with Wire(broker.bootstrap) as wire:
            pid, epoch = _init_pid(wire)
            b0 = producer_batch(pid, epoch, 0, [b"a", b"b", b"c"])
            b1 = producer_batch(pid, epoch, 3, [b"d", b"e"])
            assert _produce(wire, topic, b0) == (ErrorCode.none, 0)
            assert _produce(wire, topic, b1) == (ErrorCode.none, 3)
        # an idempotent confluent-kafka producer writes on: segments roll behind b0, b1
        produce(
            broker.bootstrap,
            topic,
            [(None, b"x" * 200) for _ in range(600)],
            enable_idempotence=True,
            batch_size=2048,
        )
        broker.kill()
    partition_dir = data_dir / f"{topic}-0"
    logs = _segment_files(partition_dir, ".log")
    snapshots = _segment_files(partition_dir, ".snapshot")
    assert len(logs) >= 4, "the test needs rolled segments"
    assert snapshots, "no producer state snapshot was written at a roll"
    active_base = int(logs[-1].name[:20])
    assert int(snapshots[-1].name[:20]) == active_base  # written at the last roll

    log_file = tmp_path / "broker-2.log"
    with BrokerProcess(data_dir, log_file=log_file) as again:
        with Wire(again.bootstrap) as wire:
            # retries of batches written before the last roll: acked where they are
            assert _produce(wire, topic, b1) == (ErrorCode.none, 3)
            assert _produce(wire, topic, b0) == (ErrorCode.none, 0)
            gap = producer_batch(pid, epoch, 9, [b"z"])
            assert _produce(wire, topic, gap)[0] is ErrorCode.out_of_order_sequence_number
            assert _produce(wire, topic, producer_batch(pid, epoch, 5, [b"f"]))[0] is (
                ErrorCode.none
            )
        values = [v for _, _, v in read_all(again.bootstrap, topic, 1)]
        assert values[:6] == [b"a", b"b", b"c", b"d", b"e", b"x" * 200]
        assert values.count(b"d") == 1 and values[-1] == b"f"
    loaded = re.search(
        rf"Log {re.escape(topic)}-0: producer state as of offset \d+ from "
        r"(\S+), (\d+) batch\(es\) replayed from offset (\d+)",
        log_file.read_text(),
    )
    assert loaded is not None, log_file.read_text()[-3000:]
    source, replayed_from = loaded.group(1), int(loaded.group(3))
    assert source == f"{active_base:020d}.snapshot"
    assert replayed_from == active_base > 0  # only what was written since the last roll
