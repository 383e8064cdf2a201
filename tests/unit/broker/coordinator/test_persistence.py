"""Coordinator state in internal logs on the real storage (no server): replay after reopen."""

from __future__ import annotations

from pathlib import Path

from kio.schema.errors import ErrorCode

from streams.broker.coordinator.group import GroupState
from streams.broker.coordinator.groups import CommittedOffset, GroupCoordinator
from streams.broker.coordinator.internal_log import CONSUMER_OFFSETS, TRANSACTION_STATE
from streams.broker.coordinator.producer_state import ProducerStateManager
from streams.broker.coordinator.transactions import TransactionCoordinator
from streams.broker.coordinator.txn_metadata import TxnState
from streams.broker.storage import LogManager
from tests.unit.broker.coordinator.test_producer_state import batch


def open_logs(path: Path) -> LogManager:
    return LogManager(path).load()


def make(logs: LogManager, now: int = 1_000):
    producers = ProducerStateManager(logs)
    groups = GroupCoordinator(logs)
    txns = TransactionCoordinator(logs, groups=groups, now_ms=now)
    return producers, groups, txns


def append(logs: LogManager, producers: ProducerStateManager, topic: str, data: bytes) -> int:
    assert producers.check(topic, 0, data) is None
    return logs.get_log(topic, 0).append(data).base_offset


def test_committed_offsets_and_generation_survive_reopen_and_deletes_stick(tmp_path):
    logs = open_logs(tmp_path)
    groups = GroupCoordinator(logs)
    groups.commit_offsets(
        "g1", {("t", 0): CommittedOffset(5, -1, "m"), ("t", 1): CommittedOffset(7)}, now_ms=1
    )
    groups.commit_offsets("g1", {("t", 0): CommittedOffset(9)}, now_ms=2)
    groups.commit_offsets("g2", {("t", 0): CommittedOffset(1)}, now_ms=3)
    groups.get_or_create("g1").generation_id = 4
    groups._persist_group(groups.groups["g1"])
    assert groups.delete_group("g2") is ErrorCode.none
    logs.close()

    logs = open_logs(tmp_path)
    assert CONSUMER_OFFSETS in logs.topics() and TRANSACTION_STATE not in logs.topics()
    again = GroupCoordinator(logs)
    assert {tp: o.offset for tp, o in again.fetch_offsets("g1", None).items()} == {
        ("t", 0): 9,
        ("t", 1): 7,
    }
    assert again.fetch_offsets("g2", None) == {}
    assert again.groups["g1"].generation_id == 4
    assert again.groups["g1"].state is GroupState.EMPTY  # members must rejoin after a restart
    assert "g2" not in again.groups
    assert again.delete_group("g2") is ErrorCode.group_id_not_found
    logs.close()


def test_commit_validation_follows_membership(tmp_path):
    groups = GroupCoordinator(None)
    assert groups.validate_commit("new", "", -1) is ErrorCode.none  # standalone consumer
    assert groups.validate_commit("new", "m", 3) is ErrorCode.illegal_generation
    group = groups.get_or_create("g")
    answers = []
    group.join(
        member_id="",
        group_instance_id=None,
        client_id="c",
        client_host="h",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        protocol_type="consumer",
        protocols=[("range", b"")],
        require_known_member_id=False,
        now_ms=0,
        callback=answers.append,
    )
    member = answers[0].member_id
    assert (
        groups.validate_commit("g", member, 1) is ErrorCode.rebalance_in_progress
    )  # awaiting sync
    group.sync(member_id=member, generation_id=1, assignments={}, now_ms=0, callback=answers.append)
    assert groups.validate_commit("g", member, 1) is ErrorCode.none
    assert groups.validate_commit("g", member, 0) is ErrorCode.illegal_generation
    assert groups.validate_commit("g", "stranger", 1) is ErrorCode.unknown_member_id
    assert (
        groups.validate_commit("g", "", -1) is ErrorCode.unknown_member_id
    )  # group has live members


def test_commit_and_abort_write_markers_track_lso_and_index_the_abort(tmp_path):
    logs = open_logs(tmp_path)
    logs.create_topic("t", 1, {})
    producers, groups, txns = make(logs)
    err, pid, epoch = txns.init_producer_id("tx", 60_000, now_ms=1_000)
    assert err is ErrorCode.none and epoch == 0

    assert txns.add_partitions("tx", pid, epoch, [("t", 0)], now_ms=1_001) is ErrorCode.none
    assert append(logs, producers, "t", batch(pid, epoch, 0, 2, transactional=True)) == 0
    assert producers.first_unstable_offset("t", 0) == 0
    assert txns.end_txn("tx", pid, epoch, True, now_ms=1_002) is ErrorCode.none
    log = logs.get_log("t", 0)
    assert log.log_end_offset == 3  # 2 records + commit marker
    assert producers.first_unstable_offset("t", 0) is None
    assert txns.end_txn("tx", pid, epoch, True, now_ms=1_003) is ErrorCode.none  # a retried commit
    assert txns.end_txn("tx", pid, epoch, False, now_ms=1_003) is ErrorCode.invalid_txn_state

    txns.add_partitions("tx", pid, epoch, [("t", 0)], now_ms=1_004)
    assert append(logs, producers, "t", batch(pid, epoch, 2, 3, transactional=True)) == 3
    assert txns.end_txn("tx", pid, epoch, False, now_ms=1_005) is ErrorCode.none
    assert log.log_end_offset == 7
    assert log.aborted_transactions(0, 7) == [(pid, 3)]
    assert log.aborted_transactions(0, 3) == []
    assert txns.txns["tx"].state is TxnState.COMPLETE_ABORT
    logs.close()


def test_ongoing_transaction_is_aborted_on_reopen_and_pending_offsets_dropped(tmp_path):
    logs = open_logs(tmp_path)
    logs.create_topic("t", 1, {})
    producers, groups, txns = make(logs)
    _, pid, epoch = txns.init_producer_id("tx", 60_000, now_ms=1_000)
    txns.add_partitions("tx", pid, epoch, [("t", 0)], now_ms=1_000)
    txns.add_offsets("tx", pid, epoch, "g", now_ms=1_000)
    assert (
        txns.txn_offset_commit(
            "tx", pid, epoch, "g", {("in", 0): CommittedOffset(42)}, now_ms=1_000
        )
        is ErrorCode.none
    )
    assert txns.pending_offsets("g") == {("in", 0)}
    append(logs, producers, "t", batch(pid, epoch, 0, 2, transactional=True))
    logs.close()  # the broker dies with the transaction open

    logs = open_logs(tmp_path)
    producers, groups, txns = make(logs, now=2_000)
    txn = txns.txns["tx"]
    assert txn.state is TxnState.COMPLETE_ABORT and txn.epoch == epoch + 1
    assert logs.get_log("t", 0).log_end_offset == 3
    assert logs.get_log("t", 0).aborted_transactions(0, 3) == [(pid, 0)]
    assert producers.first_unstable_offset("t", 0) is None
    assert groups.fetch_offsets("g", None) == {}
    # the zombie's epoch is fenced, the re-initialised producer gets the next one
    assert txns.end_txn("tx", pid, epoch, True, now_ms=2_001) is ErrorCode.producer_fenced
    assert txns.init_producer_id("tx", 60_000, now_ms=2_002) == (ErrorCode.none, pid, epoch + 2)
    logs.close()


def test_committed_transaction_applies_its_offsets(tmp_path):
    logs = open_logs(tmp_path)
    producers, groups, txns = make(logs)
    _, pid, epoch = txns.init_producer_id("tx", 60_000, now_ms=1_000)
    assert (
        txns.txn_offset_commit("tx", pid, epoch, "g", {("in", 0): CommittedOffset(1)}, now_ms=1_000)
        is ErrorCode.invalid_txn_state
    )
    txns.add_offsets("tx", pid, epoch, "g", now_ms=1_000)
    txns.txn_offset_commit("tx", pid, epoch, "g", {("in", 0): CommittedOffset(42)}, now_ms=1_000)
    assert groups.fetch_offsets("g", None) == {}
    txns.end_txn("tx", pid, epoch, True, now_ms=1_001)
    assert groups.fetch_offsets("g", None)[("in", 0)].offset == 42
    assert txns.pending_offsets("g") == set()
    logs.close()


def test_transaction_timeout_aborts_and_fences(tmp_path):
    logs = open_logs(tmp_path)
    logs.create_topic("t", 1, {})
    producers, groups, txns = make(logs)
    _, pid, epoch = txns.init_producer_id("tx", 500, now_ms=1_000)
    txns.add_partitions("tx", pid, epoch, [("t", 0)], now_ms=1_000)
    append(logs, producers, "t", batch(pid, epoch, 0, 1, transactional=True))
    txns.tick(1_500)
    assert txns.txns["tx"].state is TxnState.ONGOING
    txns.tick(1_501)
    assert txns.txns["tx"].state is TxnState.COMPLETE_ABORT
    assert (
        txns.add_partitions("tx", pid, epoch, [("t", 0)], now_ms=1_502) is ErrorCode.producer_fenced
    )
    assert logs.get_log("t", 0).aborted_transactions(0, 2) == [(pid, 0)]
    logs.close()


def test_producer_ids_are_unique_across_reopen_and_timeouts_are_validated(tmp_path):
    logs = open_logs(tmp_path)
    _, _, txns = make(logs)
    first = {txns.init_producer_id(None, 0, now_ms=1)[1] for _ in range(5)}
    assert txns.init_producer_id("tx", 10**9, now_ms=1)[0] is ErrorCode.invalid_transaction_timeout
    logs.close()
    logs = open_logs(tmp_path)
    _, _, txns = make(logs)
    second = {txns.init_producer_id(None, 0, now_ms=1)[1] for _ in range(5)}
    assert len(first | second) == 10
    logs.close()


def _stuck_in(tmp_path, state: TxnState):
    """A transaction with one record in `t`/0 left in `state`, as if writing its markers failed."""
    logs = open_logs(tmp_path)
    logs.create_topic("t", 1, {})
    producers, groups, txns = make(logs)
    _, pid, epoch = txns.init_producer_id("tx", 60_000, now_ms=1_000)
    txns.add_partitions("tx", pid, epoch, [("t", 0)], now_ms=1_000)
    append(logs, producers, "t", batch(pid, epoch, 0, 1, transactional=True))
    txns.txns["tx"].state = state
    return logs, producers, txns, pid, epoch


def test_end_txn_retry_finishes_a_half_done_commit(tmp_path):
    logs, producers, txns, pid, epoch = _stuck_in(tmp_path, TxnState.PREPARE_COMMIT)
    assert (
        txns.add_partitions("tx", pid, epoch, [("t", 0)], now_ms=1_001)
        is ErrorCode.concurrent_transactions
    )
    assert txns.end_txn("tx", pid, epoch, False, now_ms=1_002) is ErrorCode.concurrent_transactions
    assert txns.end_txn("tx", pid, epoch, True, now_ms=1_003) is ErrorCode.none
    assert txns.txns["tx"].state is TxnState.COMPLETE_COMMIT
    assert producers.first_unstable_offset("t", 0) is None
    logs.close()


def test_compacted_offsets_log_replays_to_the_latest_values(tmp_path):
    logs = open_logs(tmp_path)
    groups = GroupCoordinator(logs)
    logs.alter_topic_config(CONSUMER_OFFSETS, {"segment.bytes": "2048", "delete.retention.ms": "0"})
    for i in range(300):
        groups.commit_offsets("g", {("t", i % 3): CommittedOffset(i)}, now_ms=i)
    groups.commit_offsets("gone", {("t", 0): CommittedOffset(1)}, now_ms=300)
    groups.delete_group("gone")
    log = logs.get_log(CONSUMER_OFFSETS, 0)
    before = log.size_bytes
    logs.get_log(CONSUMER_OFFSETS, 0).roll()
    logs.run_compaction(10**13)
    assert log.size_bytes < before / 5  # the log really was compacted
    logs.close()

    logs = open_logs(tmp_path)
    again = GroupCoordinator(logs)
    assert {tp: o.offset for tp, o in again.fetch_offsets("g", None).items()} == {
        ("t", 0): 297,
        ("t", 1): 298,
        ("t", 2): 299,
    }
    assert "gone" not in again.groups and again.fetch_offsets("gone", None) == {}
    logs.close()


def test_init_producer_id_finishes_a_half_done_abort_before_bumping(tmp_path):
    logs, producers, txns, pid, epoch = _stuck_in(tmp_path, TxnState.PREPARE_ABORT)
    assert txns.init_producer_id("tx", 60_000, now_ms=1_001) == (ErrorCode.none, pid, epoch + 1)
    assert logs.get_log("t", 0).aborted_transactions(0, 2) == [(pid, 0)]
    assert producers.first_unstable_offset("t", 0) is None
    logs.close()


def test_a_partition_is_verified_only_inside_the_transaction_that_added_it(tmp_path):
    """Kafka's verification order: the transactional id's producer id, its epoch, a
    transaction being ended, then the partition among those the transaction added."""
    logs = open_logs(tmp_path)
    logs.create_topic("t", 2, {})
    _, _, txns = make(logs)
    _, pid, epoch = txns.init_producer_id("tx", 60_000, now_ms=1_000)
    tp = ("t", 0)
    assert txns.verify_partition("nobody", pid, epoch, tp) is ErrorCode.invalid_producer_id_mapping
    assert txns.verify_partition("tx", pid + 1, epoch, tp) is ErrorCode.invalid_producer_id_mapping
    assert txns.verify_partition("tx", pid, epoch + 1, tp) is ErrorCode.producer_fenced
    assert txns.verify_partition("tx", pid, epoch, tp) is ErrorCode.transaction_abortable
    txns.add_partitions("tx", pid, epoch, [tp], now_ms=1_001)
    assert txns.verify_partition("tx", pid, epoch, tp) is ErrorCode.none
    assert txns.verify_partition("tx", pid, epoch, ("t", 1)) is ErrorCode.transaction_abortable
    txns.txns["tx"].state = TxnState.PREPARE_COMMIT  # an end half done
    assert txns.verify_partition("tx", pid, epoch, tp) is ErrorCode.concurrent_transactions
    txns.txns["tx"].state = TxnState.ONGOING
    assert txns.end_txn("tx", pid, epoch, True, now_ms=1_002) is ErrorCode.none
    assert txns.verify_partition("tx", pid, epoch, tp) is ErrorCode.transaction_abortable
    logs.close()


def test_an_administrators_marker_closes_a_hanging_transaction_and_survives_reopen(tmp_path):
    """WriteTxnMarkers' path: the abort marker of a producer the coordinator never knew
    is indexed, unpins the partition, and the rebuilt state after reopening agrees."""
    logs = open_logs(tmp_path)
    logs.create_topic("t", 1, {})
    producers, _, txns = make(logs)
    log = logs.get_log("t", 0)
    log.append(batch(4242, 3, 0, 2, transactional=True))  # as before the check
    assert producers.first_unstable_offset("t", 0) == 0
    txns.write_marker(4242, 3, "t", 0, commit=False, now_ms=2_000, owner="test")
    assert producers.first_unstable_offset("t", 0) is None
    assert log.aborted_transactions(0, 3) == [(4242, 0)]
    entry = producers.partition("t", 0).entries[4242]
    assert (entry.epoch, entry.txn_first_offset) == (3, None)
    logs.close()

    logs = open_logs(tmp_path)
    producers, _, _ = make(logs)
    assert producers.first_unstable_offset("t", 0) is None
    assert logs.get_log("t", 0).aborted_transactions(0, 3) == [(4242, 0)]
    logs.close()
