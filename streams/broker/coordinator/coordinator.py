"""The broker extension that owns groups, producer state, transactions, SASL and ACLs.

``Coordinator`` plugs into the server through ``streams.broker.extension``:
the server calls ``check_produce`` before every append (with no ``await`` in
between, so check-then-append is atomic; the log updates its own producer
state with the append), ``last_stable_offset``
and ``aborted_transactions`` on read_committed fetches; handlers ask
``authorize`` (the base class's, over the ``authorizer`` this class sets at start when
``authorizer.class.name`` asks for one).
A background task ticks the clock every ``coordinator.tick.ms`` (default 100)
to expire sessions, complete timed-out rebalances and abort stale transactions, while a
group has a member (or one joining) or a transaction is open, and for ``IDLE_TICK_S``
after any request to the coordinator; otherwise every ``IDLE_TICK_S``, or at the next
request (`touched`).

BrokerContext config keys read here (all optional):
``group.initial.rebalance.delay.ms`` (default 0), ``group.min.session.timeout.ms``
(1000), ``group.max.session.timeout.ms`` (1800000),
``transaction.max.timeout.ms`` (900000), ``coordinator.tick.ms`` (100),
``producer.id.expiration.ms`` (86400000),
``sasl.users`` / ``sasl.users.file`` / ``sasl.enabled.mechanisms`` (see ``sasl.py``).
``authorizer.class.name`` / ``super.users`` / ``allow.everyone.if.no.acl.found``
(``streams.broker.security.authorizer``). SCRAM credentials and ACLs live in
``__cluster_metadata`` (``ScramCredentialStore``, ``AclStore``).

Concurrency contract: everything runs on the broker's asyncio loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.config import ConfigError
from streams.broker.context import BrokerContext
from streams.broker.coordinator.groups import GroupCoordinator
from streams.broker.coordinator.internal_log import CLUSTER_METADATA, InternalLog
from streams.broker.coordinator.producer_state import Duplicate, ProducerStateManager, Rejected
from streams.broker.coordinator.sasl import enabled_mechanisms, load_users
from streams.broker.coordinator.transactions import TransactionCoordinator
from streams.broker.coordinator.txn_metadata import TxnState
from streams.broker.errors import BrokerError
from streams.broker.extension import BrokerExtension
from streams.broker.extension import Duplicate as ProduceDuplicate
from streams.broker.extension import Reject as ProduceReject
from streams.broker.security.authorizer import AclStore, Authorizer, authorizer_settings
from streams.broker.security.credentials import ScramCredentialStore
from streams.broker.storage.producer_state import iter_headers

logger = logging.getLogger(__name__)

IDLE_TICK_S = 1.0
"""Seconds between two ticks while nothing can time out within a tick but producer ids
(whose expiration is counted in hours). An idle broker woke every 100 ms for them:
2-3 ms of CPU a second (docs/decisions/0080)."""

# What an earlier version kept producer state in at a clean shutdown; each partition
# now has its own `<offset>.snapshot` files, and this one is removed when found.
LEGACY_PRODUCER_SNAPSHOT_FILE = "producer-state.snapshot.json"

# The transaction coordinator's verification answers as Kafka's ReplicaManager and
# AddPartitionsToTxnManager hand them to a producer of Produce v3-v9 (code, message).
_PRODUCE_VERIFY_ERRORS: dict[ErrorCode, tuple[ErrorCode, str | None]] = {
    ErrorCode.producer_fenced: (ErrorCode.invalid_producer_epoch, None),
    ErrorCode.transaction_abortable: (
        ErrorCode.invalid_txn_state,
        "Partition was not added to the transaction",
    ),
    ErrorCode.concurrent_transactions: (
        ErrorCode.not_enough_replicas,
        "Unable to verify the partition has been added to the transaction. "
        "Underlying error: CONCURRENT_TRANSACTIONS",
    ),
}


def _int(raw: dict[str, str], key: str, default: int) -> int:
    value = raw.get(key)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(key, value, "an integer") from None


def _log_flush_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("flush after a transaction marker failed: %s", task.exception())


class Coordinator(BrokerExtension):
    """Groups, offsets, idempotent/transactional producers and SASL for one broker."""

    def __init__(self, broker: BrokerContext, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.broker = broker
        self.groups: GroupCoordinator | None = None
        self.producers: ProducerStateManager | None = None
        self.txns: TransactionCoordinator | None = None
        self.scram: ScramCredentialStore | None = None
        self._tick_task: asyncio.Task[None] | None = None
        self._touched: asyncio.Event | None = None
        self._touched_at = 0.0
        self._producer_expiration_ms = 86_400_000
        self._next_expiry_ms = 0
        # fail at start on bad SASL config
        self.sasl_users: dict[str, str] = load_users(broker.config.raw)
        self.sasl_mechanisms: tuple[str, ...] = enabled_mechanisms(broker.config.raw)
        self._authorizer_settings = authorizer_settings(broker.config.raw)

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def start(self) -> None:
        broker = self.broker
        raw = broker.config.raw
        self.sasl_users = load_users(raw)
        logs = broker.logs
        metadata = InternalLog(logs, CLUSTER_METADATA)
        records = list(metadata.replay())
        self.scram = ScramCredentialStore(metadata)
        self.scram.load(records)
        acls = AclStore(metadata)
        acls.load(records)
        enabled, super_users, allow_if_no_acl = self._authorizer_settings
        if enabled:
            self.authorizer = Authorizer(
                acls, super_users=super_users, allow_if_no_acl=allow_if_no_acl
            )
        self.producers = ProducerStateManager(logs)
        (broker.config.data_dir / LEGACY_PRODUCER_SNAPSHOT_FILE).unlink(missing_ok=True)
        self.groups = GroupCoordinator(
            logs,
            initial_rebalance_delay_ms=_int(raw, "group.initial.rebalance.delay.ms", 0),
            min_session_timeout_ms=_int(raw, "group.min.session.timeout.ms", 1000),
            max_session_timeout_ms=_int(raw, "group.max.session.timeout.ms", 1_800_000),
        )
        self.txns = TransactionCoordinator(
            logs,
            groups=self.groups,
            on_marker=self._marker_written,
            max_timeout_ms=_int(raw, "transaction.max.timeout.ms", 900_000),
            now_ms=self.now_ms(),
        )
        tick_ms = _int(raw, "coordinator.tick.ms", 100)
        self._producer_expiration_ms = _int(raw, "producer.id.expiration.ms", 86_400_000)
        self._next_expiry_ms = 0
        self._touched = asyncio.Event()
        self._tick_task = asyncio.get_running_loop().create_task(self._ticker(tick_ms))
        logger.info(
            "coordinator started: %d groups, %d transactional ids, SASL mechanisms %s, "
            "%d SCRAM users, authorizer %s",
            len(self.groups.groups),
            len(self.txns.txns),
            ",".join(self.sasl_mechanisms),
            len(self.scram.users()),
            "on" if self.authorizer is not None else "off",
        )

    async def stop(self) -> None:
        if self._tick_task is not None:
            self._tick_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._tick_task
        try:
            if self.groups is not None:
                self.groups.flush()
            if self.txns is not None:
                self.txns.flush()
        except (BrokerError, OSError) as e:  # an offline data dir: the next start recovers
            logger.error("coordinator state not flushed at shutdown: %s", e)

    def touched(self) -> None:
        """A request reached the coordinator: tick every ``coordinator.tick.ms`` from now
        for at least ``IDLE_TICK_S`` (a handler may add the member whose join the ticks
        complete only after an ``await``)."""
        self._touched_at = time.monotonic()
        if self._touched is not None:
            self._touched.set()

    def _timing(self) -> bool:
        """Whether something may time out within a tick: a group with a member or one
        joining, an open transaction, or a request less than ``IDLE_TICK_S`` ago."""
        assert self.groups is not None and self.txns is not None
        return (
            time.monotonic() - self._touched_at < IDLE_TICK_S
            or any(not g.is_empty() for g in self.groups.groups.values())
            or any(t.state is TxnState.ONGOING for t in self.txns.txns.values())
        )

    async def _ticker(self, tick_ms: int) -> None:
        assert self._touched is not None
        while True:
            if self._timing():
                await asyncio.sleep(tick_ms / 1000)
            else:
                self._touched.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._touched.wait(), IDLE_TICK_S)
            try:
                self.tick(self.now_ms())
            except Exception:  # a bug in one tick must not stop session expiry for good
                logger.exception("coordinator tick failed; retrying next tick")

    def _marker_written(self, topic: str, partition: int) -> None:
        self.broker.notifier.notify(topic, partition)  # the LSO moved: wake read_committed fetches
        # under durability=sync the marker counts once flushed; share the group fsync
        flushed = asyncio.ensure_future(self.broker.flusher.flush())
        flushed.add_done_callback(_log_flush_failure)

    def tick(self, now_ms: int) -> None:
        assert self.groups is not None and self.txns is not None and self.producers is not None
        self.groups.tick(now_ms)
        self.txns.tick(now_ms)
        if now_ms >= self._next_expiry_ms:
            self._next_expiry_ms = now_ms + min(60_000, self._producer_expiration_ms)
            self.producers.expire(now_ms, self._producer_expiration_ms)

    def _get_log(self, topic: str, partition: int) -> Any:
        try:
            return self.broker.logs.get_log(topic, partition)
        except (BrokerError, OSError):  # unknown topic/partition: no producer state to rebuild
            return None

    # ---- server hooks --------------------------------------------------------

    def check_produce(
        self,
        topic: str,
        partition: int,
        records: memoryview,
        *,
        transactional_id: str | None,
        acks: int,
    ) -> ProduceDuplicate | ProduceReject | None:
        assert self.producers is not None
        unverified = self._verify_transaction(topic, partition, records, transactional_id)
        if unverified is not None:
            return unverified
        verdict = self.producers.check(topic, partition, records)
        if isinstance(verdict, Duplicate):
            return ProduceDuplicate(verdict.base_offset)
        if isinstance(verdict, Rejected):
            return ProduceReject(int(verdict.error.value), verdict.message)
        return None

    def _verify_transaction(
        self, topic: str, partition: int, records: memoryview, transactional_id: str | None
    ) -> ProduceReject | None:
        """Refuse a transactional batch unless the ongoing transaction of the request's
        transactional id, by the batch's producer id and epoch, added this partition.

        Kafka's transaction verification (KIP-890, on by default since 3.6): a partition
        without an open transaction of the producer asks the transaction coordinator
        before the first batch; later batches of that transaction find it open in the
        partition's producer state, where the epoch check fences a stale producer. Without
        it any client could open a transaction nobody ends and hold back every
        read_committed reader of the partition for good, across restarts. The coordinator's
        answers reach the producer as Kafka's produce path translates them for clients of
        Produce v3-v9: PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, a partition not in the
        transaction as INVALID_TXN_STATE, a transaction being ended as NOT_ENOUGH_REPLICAS
        (retriable). A request without a transactional id was refused as a whole already.
        """
        assert self.producers is not None and self.txns is not None
        if transactional_id is None:
            return None
        state = None
        for batch in iter_headers(records):
            if not batch.is_transactional or batch.is_control or batch.producer_id < 0:
                continue
            if state is None:
                state = self.producers.partition(topic, partition)
            entry = state.entries.get(batch.producer_id)
            if entry is not None and entry.txn_first_offset is not None:
                continue  # its transaction is open here: the epoch check is the log's
            error = self.txns.verify_partition(
                transactional_id, batch.producer_id, batch.producer_epoch, (topic, partition)
            )
            if error is ErrorCode.none:
                continue
            code, message = _PRODUCE_VERIFY_ERRORS.get(error, (error, None))
            logger.warning(
                "%s-%d: refused a transactional batch of producer %d epoch %d (transactional "
                "id %s): %s, answered %s",
                topic,
                partition,
                batch.producer_id,
                batch.producer_epoch,
                transactional_id,
                error.name,
                code.name,
            )
            return ProduceReject(int(code.value), message)
        return None

    def last_stable_offset(self, topic: str, partition: int, high_watermark: int) -> int:
        if self.producers is None:
            return high_watermark
        first = self.producers.first_unstable_offset(topic, partition)
        return high_watermark if first is None else min(first, high_watermark)

    def aborted_transactions(
        self, topic: str, partition: int, fetch_offset: int, upper: int
    ) -> list[tuple[int, int]]:
        log = self._get_log(topic, partition)
        if log is None:
            return []
        return [
            (int(pid), int(first)) for pid, first in log.aborted_transactions(fetch_offset, upper)
        ]
