"""Producer ids and the transaction coordinator (KIP-98, single node).

Producer ids are handed out from blocks whose end is written to
``__transaction_state`` before any id of the block is used, so a restart never
reuses an id. Each transactional id's metadata (producer id, epoch, timeout,
state, partitions, groups, pending transactional offset commits;
``TxnMetadata``, txn_metadata.py) is a record keyed by the id in the same log.

Ending a transaction is done in one step on the loop thread: write
PrepareCommit/PrepareAbort, write a control batch to every partition of the
transaction (storage ``append_control``; an abort also goes to the partition's
aborted-transaction index), apply the pending offset commits on commit, write
CompleteCommit/CompleteAbort. A restart finds at most a transaction that was
Ongoing (aborted, epoch bumped) or Prepare* (completed) and finishes it.

Concurrency contract: not thread-safe; called from the broker's loop thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.coordinator.groups import CommittedOffset, GroupCoordinator
from streams.broker.coordinator.internal_log import TRANSACTION_STATE, InternalLog
from streams.broker.coordinator.txn_metadata import TxnMetadata, TxnState
from streams.broker.errors import BrokerError

logger = logging.getLogger(__name__)

_PID_BLOCK = 1000
_MAX_EPOCH = 2**15 - 2


class TransactionCoordinator:
    """Producer-id allocation plus every transactional id's state machine."""

    def __init__(
        self,
        log_manager: Any | None,
        *,
        groups: GroupCoordinator,
        on_marker: Callable[[str, int], None] | None = None,
        max_timeout_ms: int = 900_000,
        now_ms: int = 0,
    ) -> None:
        self._log_manager = log_manager
        self._groups = groups
        self._on_marker = on_marker
        self.max_timeout_ms = max_timeout_ms
        self.txns: dict[str, TxnMetadata] = {}
        self._next_pid = 0
        self._pid_block_end = 0
        self._log = InternalLog(log_manager, TRANSACTION_STATE) if log_manager is not None else None
        self._now_ms = now_ms
        if self._log is not None:
            self._load(now_ms)

    # ---- persistence ---------------------------------------------------------

    def _load(self, now_ms: int) -> None:
        assert self._log is not None
        for key, value in self._log.replay():
            if key.get("t") == "pid" and value is not None:
                self._next_pid = self._pid_block_end = max(self._pid_block_end, value["next"])
            elif key.get("t") == "txn":
                if value is None:
                    self.txns.pop(key["id"], None)
                else:
                    self.txns[key["id"]] = TxnMetadata.from_json(key["id"], value)
        logger.info(
            "loaded %s: %d transactional ids, next producer id %d",
            TRANSACTION_STATE,
            len(self.txns),
            self._next_pid,
        )
        for txn in list(self.txns.values()):
            if txn.state is TxnState.ONGOING:
                logger.info(
                    "transaction %s was in flight at restart; aborting it", txn.transactional_id
                )
                self._bump_epoch(txn)
                self._complete(txn, commit=False, now_ms=now_ms)
            elif txn.state is TxnState.PREPARE_COMMIT:
                self._complete(txn, commit=True, now_ms=now_ms)
            elif txn.state is TxnState.PREPARE_ABORT:
                self._complete(txn, commit=False, now_ms=now_ms)

    def _persist(self, txn: TxnMetadata) -> None:
        if self._log is not None:
            self._log.append(
                [({"t": "txn", "id": txn.transactional_id}, txn.to_json())], now_ms=self._now_ms
            )

    def allocate_producer_id(self) -> int:
        if self._next_pid >= self._pid_block_end:
            self._pid_block_end = self._next_pid + _PID_BLOCK
            if self._log is not None:
                self._log.append(
                    [({"t": "pid"}, {"next": self._pid_block_end})], now_ms=self._now_ms
                )
                self._log.flush()  # an id must never be handed out twice, even after a crash
        pid = self._next_pid
        self._next_pid += 1
        return pid

    # ---- InitProducerId ------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str | None,
        timeout_ms: int,
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
        now_ms: int,
    ) -> tuple[ErrorCode, int, int]:
        """``(error, producer id, epoch)`` for a producer starting (or re-initialising)."""
        self._now_ms = now_ms
        if not transactional_id:
            return ErrorCode.none, self.allocate_producer_id(), 0
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return ErrorCode.invalid_transaction_timeout, -1, -1
        txn = self.txns.get(transactional_id)
        if txn is None:
            txn = TxnMetadata(transactional_id, self.allocate_producer_id(), 0, timeout_ms)
            self.txns[transactional_id] = txn
            self._persist(txn)
            logger.info(
                "transactional id %s: producer id %d epoch 0", transactional_id, txn.producer_id
            )
            return ErrorCode.none, txn.producer_id, txn.epoch
        if producer_id >= 0 and (producer_id, producer_epoch) != (txn.producer_id, txn.epoch):
            return ErrorCode.producer_fenced, -1, -1
        if txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            # an end that failed half-way is decided already: finish it first
            self._complete(txn, commit=txn.state is TxnState.PREPARE_COMMIT, now_ms=now_ms)
        if txn.state is TxnState.ONGOING:
            # a new instance of the producer: fence the old one and abort its transaction
            self._bump_epoch(txn)
            self._complete(txn, commit=False, now_ms=now_ms)
        else:
            self._bump_epoch(txn)
        txn.timeout_ms = timeout_ms
        txn.state = TxnState.EMPTY
        self._persist(txn)
        logger.info(
            "transactional id %s: producer id %d epoch %d",
            transactional_id,
            txn.producer_id,
            txn.epoch,
        )
        return ErrorCode.none, txn.producer_id, txn.epoch

    def _bump_epoch(self, txn: TxnMetadata) -> None:
        if txn.epoch >= _MAX_EPOCH:
            txn.producer_id, txn.epoch = self.allocate_producer_id(), 0
        else:
            txn.epoch += 1

    # ---- transaction APIs ----------------------------------------------------

    def _validate(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> TxnMetadata | ErrorCode:
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if producer_epoch != txn.epoch:
            return ErrorCode.producer_fenced
        if txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return ErrorCode.concurrent_transactions
        return txn

    def verify_partition(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: tuple[str, int]
    ) -> ErrorCode:
        """Whether the ongoing transaction of `transactional_id` (by this producer id and
        epoch) added partition `tp`: what the partition asks before it appends the
        transaction's first batch (Kafka's `handleVerifyPartitionsInTransaction`)."""
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if txn.epoch != producer_epoch:
            return ErrorCode.producer_fenced
        if txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return ErrorCode.concurrent_transactions
        if txn.state is not TxnState.ONGOING or tp not in txn.partitions:
            return ErrorCode.transaction_abortable
        return ErrorCode.none

    def _begin(self, txn: TxnMetadata, now_ms: int) -> None:
        if txn.state is not TxnState.ONGOING:
            txn.state = TxnState.ONGOING
            txn.start_ms = now_ms
            txn.partitions.clear()
            txn.groups.clear()
            txn.pending_offsets.clear()

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[tuple[str, int]],
        *,
        now_ms: int,
    ) -> ErrorCode:
        self._now_ms = now_ms
        txn = self._validate(transactional_id, producer_id, producer_epoch)
        if isinstance(txn, ErrorCode):
            return txn
        self._begin(txn, now_ms)
        new = set(partitions) - txn.partitions
        if new:
            txn.partitions |= new
            self._persist(txn)
        return ErrorCode.none

    def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        *,
        now_ms: int,
    ) -> ErrorCode:
        self._now_ms = now_ms
        txn = self._validate(transactional_id, producer_id, producer_epoch)
        if isinstance(txn, ErrorCode):
            return txn
        self._begin(txn, now_ms)
        if group_id not in txn.groups:
            txn.groups.add(group_id)
            self._persist(txn)
        return ErrorCode.none

    def txn_offset_commit(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        offsets: dict[tuple[str, int], CommittedOffset],
        *,
        member_id: str = "",
        generation_id: int = -1,
        group_instance_id: str | None = None,
        now_ms: int,
    ) -> ErrorCode:
        self._now_ms = now_ms
        txn = self._validate(transactional_id, producer_id, producer_epoch)
        if isinstance(txn, ErrorCode):
            return txn
        if txn.state is not TxnState.ONGOING or group_id not in txn.groups:
            return ErrorCode.invalid_txn_state
        if member_id or generation_id >= 0 or group_instance_id:
            error = self._groups.validate_commit(
                group_id, member_id, generation_id, group_instance_id=group_instance_id
            )
            if error is not ErrorCode.none:
                return error
        txn.pending_offsets.setdefault(group_id, {}).update(offsets)
        self._persist(txn)
        return ErrorCode.none

    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        now_ms: int,
    ) -> ErrorCode:
        self._now_ms = now_ms
        prepared = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        pending = self.txns.get(transactional_id)
        if (
            pending is not None
            and pending.state is prepared
            and (pending.producer_id, pending.epoch) == (producer_id, producer_epoch)
        ):
            # an earlier attempt failed half-way (e.g. a disk error writing a marker):
            # finish it; a second marker on a partition that already has one is harmless
            self._complete(pending, commit=commit, now_ms=now_ms)
            return ErrorCode.none
        txn = self._validate(transactional_id, producer_id, producer_epoch)
        if isinstance(txn, ErrorCode):
            return txn
        if txn.state is TxnState.ONGOING:
            self._complete(txn, commit=commit, now_ms=now_ms)
            return ErrorCode.none
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if txn.state in (TxnState.EMPTY, done):
            return ErrorCode.none  # nothing was sent, or a retry of the end that already happened
        return ErrorCode.invalid_txn_state

    def _complete(self, txn: TxnMetadata, *, commit: bool, now_ms: int) -> None:
        txn.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        self._persist(txn)
        for topic, partition in sorted(txn.partitions):
            self.write_marker(
                txn.producer_id,
                txn.epoch,
                topic,
                partition,
                commit=commit,
                now_ms=now_ms,
                owner=f"transaction {txn.transactional_id}",
            )
        if commit:
            for group_id, offsets in txn.pending_offsets.items():
                self._groups.commit_offsets(group_id, offsets, now_ms=now_ms)
        logger.info(
            "transaction %s (producer %d epoch %d) %s: %d partitions, %d groups",
            txn.transactional_id,
            txn.producer_id,
            txn.epoch,
            "committed" if commit else "aborted",
            len(txn.partitions),
            len(txn.pending_offsets),
        )
        txn.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        txn.partitions.clear()
        txn.groups.clear()
        txn.pending_offsets.clear()
        # start_ms stays: Kafka describes a completed transaction with its start time.
        self._persist(txn)

    def write_marker(
        self,
        producer_id: int,
        epoch: int,
        topic: str,
        partition: int,
        *,
        commit: bool,
        now_ms: int,
        coordinator_epoch: int = 0,
        owner: str,
    ) -> None:
        """Write `producer_id`'s commit or abort marker to a partition, which closes its open
        transaction there (an abort is indexed for read_committed readers): for this
        coordinator's own transactions, and for WriteTxnMarkers (an administrator aborting
        a hanging transaction with `kafka-transactions abort`). `owner` names who asked,
        for the log."""
        if self._log_manager is None:
            return
        try:
            log = self._log_manager.get_log(topic, partition)
        except (BrokerError, OSError) as e:  # the topic was deleted while the txn was open
            logger.warning("%s: no log %s-%d for its marker: %s", owner, topic, partition, e)
            return
        if log is None:
            return
        # the log ends the producer's transaction in its state and, for an abort, indexes
        # the transaction with the marker in one step
        log.append_control(producer_id, epoch, commit, now_ms, coordinator_epoch=coordinator_epoch)
        if self._on_marker is not None:
            try:
                self._on_marker(topic, partition)
            except Exception:  # waking fetches is best effort; the marker is written
                logger.exception("%s: after-marker hook failed for %s-%d", owner, topic, partition)

    def pending_offsets(self, group_id: str) -> set[tuple[str, int]]:
        """Partitions of ``group_id`` with a transactional offset commit not yet ended."""
        out: set[tuple[str, int]] = set()
        for txn in self.txns.values():
            if txn.state is TxnState.ONGOING:
                out.update(txn.pending_offsets.get(group_id, ()))
        return out

    # ---- time ----------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Abort transactions open longer than their timeout, fencing the producer."""
        self._now_ms = now_ms
        for txn in list(self.txns.values()):
            if txn.state is TxnState.ONGOING and now_ms - txn.start_ms > txn.timeout_ms:
                logger.warning(
                    "transaction %s open for %d ms > timeout %d ms; aborting it",
                    txn.transactional_id,
                    now_ms - txn.start_ms,
                    txn.timeout_ms,
                )
                self._bump_epoch(txn)
                self._complete(txn, commit=False, now_ms=now_ms)

    def flush(self) -> None:
        if self._log is not None:
            self._log.flush()
