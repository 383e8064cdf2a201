"""Transaction admin APIs, as `kafka-transactions list|describe|describe-producers|abort`
use them: DescribeTransactions (65) v0, ListTransactions (66) v0–v2, DescribeProducers
(61) v0 and WriteTxnMarkers (27) v1.

DescribeProducers lists a partition's producers from its producer state (epoch, last
sequence and timestamp, the first offset of its open transaction; the coordinator epoch
is always -1, see `_NO_COORDINATOR_EPOCH`), as Kafka's `UnifiedLog.activeProducers` does. WriteTxnMarkers writes a producer's commit
or abort marker to partitions, as Kafka's does for the transaction coordinator and for
`Admin.abortTransaction`, which `kafka-transactions abort` calls to end a hanging
transaction (one its coordinator no longer knows, which otherwise holds back
read_committed readers for good): a marker of an epoch older than the producer's is
INVALID_PRODUCER_EPOCH, as Kafka's `ProducerAppendInfo` answers. Kafka
checks CLUSTER_ACTION first; this broker has no authorizer (with SASL on, only an
authenticated client gets here). The coordinator's own topics take no markers from
clients (INVALID_TOPIC_EXCEPTION): their transactions live in the coordinator.

DescribeTransactions and ListTransactions read the coordinator's `TxnMetadata`; neither
changes anything. State names are
Kafka's (`Empty`, `Ongoing`, `PrepareCommit`, ...). ListTransactions filters as Kafka's
TransactionStateManager does: by state (names it does not know are returned in
`unknown_state_filters` and match nothing), by producer id, from v1 by how long an open
transaction has been running (`duration_filter` ms, -1: any), from v2 by a regular
expression the whole transactional id must match.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import RequestContext
from streams.broker.coordinator.coordinator import Coordinator
from streams.broker.coordinator.txn_metadata import TxnMetadata, TxnState
from streams.broker.handlers import catalog
from streams.broker.protocol import make, response_module
from streams.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType

logger = logging.getLogger(__name__)

# The partition's producer state does not keep the coordinator epoch of a producer's
# latest marker: one coordinator writes them all, so there is no older coordinator to
# fence. DescribeProducers says so as Kafka does for a producer without a marker (-1).
_NO_COORDINATOR_EPOCH = -1

WRITE_TXN_MARKERS = 27
DESCRIBE_PRODUCERS = 61
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66
_ZERO = timedelta(0)
_STATES = {s.value for s in TxnState}


def _coord(ctx: RequestContext) -> Coordinator:
    return ctx.broker.extension  # type: ignore[return-value]


def _time(ms: int) -> datetime:
    """Milliseconds since the epoch as kio's timestamp; -1 (none) stays -1 on the wire."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


async def describe_transactions(ctx: RequestContext, request: Any) -> Any:
    module = response_module(DESCRIBE_TRANSACTIONS, ctx.api_version)
    coord = _coord(ctx)
    txns = coord.txns.txns if coord.txns is not None else {}
    states = []
    for tid in request.transactional_ids:
        txn = txns.get(tid)
        denied = not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid)
        if txn is None or denied:
            states.append(
                make(
                    module.TransactionState,
                    error_code=ErrorCode.transactional_id_authorization_failed
                    if denied
                    else ErrorCode.transactional_id_not_found,
                    transactional_id=tid,
                    transaction_state="",
                    transaction_timeout=_ZERO,
                    transaction_start_time=_time(-1),
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=(),
                )
            )
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(txn.partitions):
            # Kafka shows only the topics the principal may describe
            if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic, log_denied=False):
                by_topic.setdefault(topic, []).append(partition)
        states.append(
            make(
                module.TransactionState,
                error_code=ErrorCode.none,
                transactional_id=tid,
                transaction_state=txn.state.value,
                transaction_timeout=timedelta(milliseconds=txn.timeout_ms),
                transaction_start_time=_time(txn.start_ms),
                producer_id=txn.producer_id,
                producer_epoch=txn.epoch,
                topics=tuple(
                    make(module.TopicData, topic=t, partitions=tuple(ps))
                    for t, ps in by_topic.items()
                ),
            )
        )
    return make(
        module.DescribeTransactionsResponse, throttle_time=_ZERO, transaction_states=tuple(states)
    )


def _listed(txn: TxnMetadata, request: Any, states: set[str], now_ms: int) -> bool:
    if request.state_filters and txn.state.value not in states:
        return False
    if request.producer_id_filters and txn.producer_id not in request.producer_id_filters:
        return False
    duration = int(getattr(request, "duration_filter", -1))
    if duration >= 0 and (txn.start_ms < 0 or now_ms - txn.start_ms < duration):
        return False
    pattern = getattr(request, "transactional_id_pattern", None)
    return not pattern or re.fullmatch(pattern, txn.transactional_id) is not None


async def list_transactions(ctx: RequestContext, request: Any) -> Any:
    module = response_module(LIST_TRANSACTIONS, ctx.api_version)
    coord = _coord(ctx)
    txns = coord.txns.txns if coord.txns is not None else {}
    pattern = getattr(request, "transactional_id_pattern", None)
    if pattern:
        try:
            re.compile(pattern)
        except re.error:
            return make(
                module.ListTransactionsResponse,
                throttle_time=_ZERO,
                error_code=ErrorCode.invalid_regular_expression,
                unknown_state_filters=(),
                transaction_states=(),
            )
    unknown = tuple(s for s in request.state_filters if s not in _STATES)
    states = set(request.state_filters) - set(unknown)
    now = coord.now_ms()
    listed = tuple(
        make(
            module.TransactionState,
            transactional_id=txn.transactional_id,
            producer_id=txn.producer_id,
            transaction_state=txn.state.value,
        )
        for txn in sorted(txns.values(), key=lambda t: t.transactional_id)
        if _listed(txn, request, states, now)
        and ctx.authorized(
            AclOperation.DESCRIBE,
            ResourceType.TRANSACTIONAL_ID,
            txn.transactional_id,
            log_denied=False,
        )
    )
    return make(
        module.ListTransactionsResponse,
        throttle_time=_ZERO,
        error_code=ErrorCode.none,
        unknown_state_filters=unknown,
        transaction_states=listed,
    )


def _partition_exists(ctx: RequestContext, topic: str, partition: int) -> bool:
    return 0 <= partition < (catalog.partition_count(ctx.broker, topic) or 0)


async def describe_producers(ctx: RequestContext, request: Any) -> Any:
    module = response_module(DESCRIBE_PRODUCERS, ctx.api_version)
    coord = _coord(ctx)
    assert coord.producers is not None
    topics = []
    for t in request.topics:
        partitions = []
        readable = ctx.authorized(AclOperation.READ, ResourceType.TOPIC, t.name)
        for p in t.partition_indexes:
            if not readable or not _partition_exists(ctx, t.name, int(p)):
                partitions.append(
                    make(
                        module.PartitionResponse,
                        partition_index=p,
                        error_code=ErrorCode.unknown_topic_or_partition
                        if readable
                        else ErrorCode.topic_authorization_failed,
                        error_message=None,
                        active_producers=(),
                    )
                )
                continue
            state = coord.producers.partition(t.name, int(p))
            producers = tuple(
                make(
                    module.ProducerState,
                    producer_id=pid,
                    producer_epoch=entry.epoch,
                    last_sequence=entry.last_sequence,
                    last_timestamp=entry.last_timestamp_ms,
                    coordinator_epoch=_NO_COORDINATOR_EPOCH,
                    current_txn_start_offset=(
                        -1 if entry.txn_first_offset is None else entry.txn_first_offset
                    ),
                )
                for pid, entry in sorted(state.entries.items())
            )
            partitions.append(
                make(
                    module.PartitionResponse,
                    partition_index=p,
                    error_code=ErrorCode.none,
                    error_message=None,
                    active_producers=producers,
                )
            )
        topics.append(make(module.TopicResponse, name=t.name, partitions=tuple(partitions)))
    return make(module.DescribeProducersResponse, throttle_time=_ZERO, topics=tuple(topics))


def _write_marker(
    ctx: RequestContext, marker: Any, topic: str, partition: int, now_ms: int
) -> ErrorCode:
    """Write one producer's marker to one partition; its error code."""
    coord = _coord(ctx)
    assert coord.producers is not None and coord.txns is not None
    if not _partition_exists(ctx, topic, partition):
        return ErrorCode.unknown_topic_or_partition
    if catalog.is_internal(ctx.broker, topic):
        return ErrorCode.invalid_topic_exception
    pid, epoch = int(marker.producer_id), int(marker.producer_epoch)
    entry = coord.producers.partition(topic, partition).entries.get(pid)
    if entry is not None and epoch < entry.epoch:
        return ErrorCode.invalid_producer_epoch
    outcome = "commit" if marker.transaction_result else "abort"
    coord.txns.write_marker(
        pid,
        epoch,
        topic,
        partition,
        commit=bool(marker.transaction_result),
        now_ms=now_ms,
        coordinator_epoch=int(marker.coordinator_epoch),
        owner=f"WriteTxnMarkers from {ctx.connection.peer}",
    )
    logger.info(
        "%s-%d: wrote the %s marker of producer %d epoch %d (WriteTxnMarkers from %s; open "
        "transaction from offset %s)",
        topic,
        partition,
        outcome,
        pid,
        epoch,
        ctx.connection.peer,
        None if entry is None else entry.txn_first_offset,
    )
    return ErrorCode.none


async def write_txn_markers(ctx: RequestContext, request: Any) -> Any:
    module = response_module(WRITE_TXN_MARKERS, ctx.api_version)
    now = _coord(ctx).now_ms()
    # Kafka: only brokers write markers, with CLUSTER_ACTION; anyone else is refused whole
    allowed = ctx.authorized(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    markers = []
    for marker in request.markers:
        topics = []
        for t in marker.topics:
            partitions = tuple(
                make(
                    module.WritableTxnMarkerPartitionResult,
                    partition_index=p,
                    error_code=_write_marker(ctx, marker, t.name, int(p), now)
                    if allowed
                    else ErrorCode.cluster_authorization_failed,
                )
                for p in t.partition_indexes
            )
            topics.append(
                make(module.WritableTxnMarkerTopicResult, name=t.name, partitions=partitions)
            )
        markers.append(
            make(
                module.WritableTxnMarkerResult,
                producer_id=marker.producer_id,
                topics=tuple(topics),
            )
        )
    return make(module.WriteTxnMarkersResponse, markers=tuple(markers))


APIS = [
    (WRITE_TXN_MARKERS, (1, 1), write_txn_markers),
    (DESCRIBE_PRODUCERS, (0, 0), describe_producers),
    (DESCRIBE_TRANSACTIONS, (0, 0), describe_transactions),
    (LIST_TRANSACTIONS, (0, 2), list_transactions),
]
