"""Handlers of producer ids and transactions: InitProducerId 0–4,
AddPartitionsToTxn 0–3, AddOffsetsToTxn 0–3, TxnOffsetCommit 0–3, EndTxn 0–3."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import RequestContext
from streams.broker.coordinator.coordinator import Coordinator
from streams.broker.coordinator.groups import CommittedOffset
from streams.broker.handlers import catalog
from streams.broker.protocol import make, response_module
from streams.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType

logger = logging.getLogger(__name__)

_ZERO = timedelta(0)


def _coord(ctx: RequestContext) -> Coordinator:
    return ctx.broker.extension  # type: ignore[return-value]


def _may_write(ctx: RequestContext, transactional_id: str) -> bool:
    return ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _ms(value: Any) -> int:
    if isinstance(value, timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def _init_refused(ctx: RequestContext, transactional_id: str | None) -> ErrorCode | None:
    """Kafka's check of InitProducerId: WRITE on the transactional id; without one (an
    idempotent producer), IDEMPOTENT_WRITE on the cluster or WRITE on some topic."""
    if transactional_id is not None:
        if _may_write(ctx, transactional_id):
            return None
        return ErrorCode.transactional_id_authorization_failed
    if ctx.authorized(
        AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
    ) or ctx.broker.extension.authorize_any(ctx.connection, AclOperation.WRITE, ResourceType.TOPIC):
        return None
    return ErrorCode.cluster_authorization_failed


async def init_producer_id(ctx: RequestContext, request: Any) -> Any:
    module = response_module(22, ctx.api_version)
    coord = _coord(ctx)
    assert coord.txns is not None
    refused = _init_refused(ctx, request.transactional_id)
    if refused is not None:
        return make(
            module.InitProducerIdResponse,
            throttle_time=_ZERO,
            error_code=refused,
            producer_id=-1,
            producer_epoch=-1,
        )
    error, pid, epoch = coord.txns.init_producer_id(
        request.transactional_id,
        _ms(request.transaction_timeout),
        producer_id=getattr(request, "producer_id", -1),
        producer_epoch=getattr(request, "producer_epoch", -1),
        now_ms=coord.now_ms(),
    )
    if error is ErrorCode.producer_fenced and ctx.api_version < 4:
        error = ErrorCode.invalid_producer_epoch  # PRODUCER_FENCED arrived with v4 (KIP-588)
    return make(
        module.InitProducerIdResponse,
        throttle_time=_ZERO,
        error_code=error,
        producer_id=pid,
        producer_epoch=epoch,
    )


def _fenced_code(error: ErrorCode) -> ErrorCode:
    # the transaction APIs below 4 predate PRODUCER_FENCED; old clients know INVALID_PRODUCER_EPOCH
    return ErrorCode.invalid_producer_epoch if error is ErrorCode.producer_fenced else error


async def add_partitions_to_txn(ctx: RequestContext, request: Any) -> Any:
    module = response_module(24, ctx.api_version)
    coord = _coord(ctx)
    assert coord.txns is not None
    requested = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    denied = {
        t.name
        for t in request.v3_and_below_topics
        if not ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, t.name)
    }
    unknown = {
        (t, p) for t, p in requested if not 0 <= p < (catalog.partition_count(ctx.broker, t) or 0)
    }
    if not _may_write(ctx, request.v3_and_below_transactional_id):
        errors = dict.fromkeys(requested, ErrorCode.transactional_id_authorization_failed)
    elif unknown or denied:
        errors = {
            tp: ErrorCode.topic_authorization_failed
            if tp[0] in denied
            else ErrorCode.unknown_topic_or_partition
            if tp in unknown
            else ErrorCode.operation_not_attempted
            for tp in requested
        }
    else:
        error = coord.txns.add_partitions(
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            requested,
            now_ms=coord.now_ms(),
        )
        errors = {tp: _fenced_code(error) for tp in requested}
    results = tuple(
        make(
            module.AddPartitionsToTxnTopicResult,
            name=t.name,
            results_by_partition=tuple(
                make(
                    module.AddPartitionsToTxnPartitionResult,
                    partition_index=p,
                    partition_error_code=errors[(t.name, p)],
                )
                for p in t.partitions
            ),
        )
        for t in request.v3_and_below_topics
    )
    return make(
        module.AddPartitionsToTxnResponse,
        throttle_time=_ZERO,
        results_by_topic_v3_and_below=results,
    )


async def add_offsets_to_txn(ctx: RequestContext, request: Any) -> Any:
    module = response_module(25, ctx.api_version)
    coord = _coord(ctx)
    assert coord.txns is not None
    if not _may_write(ctx, request.transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    elif not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        error = ErrorCode.group_authorization_failed
    else:
        error = coord.txns.add_offsets(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.group_id,
            now_ms=coord.now_ms(),
        )
    return make(module.AddOffsetsToTxnResponse, throttle_time=_ZERO, error_code=_fenced_code(error))


def _txn_commit_refused(ctx: RequestContext, request: Any) -> Any | None:
    """Kafka's first checks of TxnOffsetCommit: WRITE on the transactional id, then READ on
    the group. A refusal fails every partition (the topics, by a function of the response
    module), else None."""
    if not _may_write(ctx, request.transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    elif not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        error = ErrorCode.group_authorization_failed
    else:
        return None
    error_of = {t.name: error for t in request.topics}

    def topics(module: Any) -> tuple[Any, ...]:
        return tuple(
            make(
                module.TxnOffsetCommitResponseTopic,
                name=t.name,
                partitions=tuple(
                    make(
                        module.TxnOffsetCommitResponsePartition,
                        partition_index=p.partition_index,
                        error_code=error_of[t.name],
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        )

    return topics


async def txn_offset_commit(ctx: RequestContext, request: Any) -> Any:
    module = response_module(28, ctx.api_version)
    coord = _coord(ctx)
    assert coord.txns is not None
    now = coord.now_ms()
    refused = _txn_commit_refused(ctx, request)
    if refused is not None:
        return make(module.TxnOffsetCommitResponse, throttle_time=_ZERO, topics=refused(module))
    # as Kafka: partitions of topics the principal may not read get TOPIC_AUTHORIZATION_FAILED,
    # those that do not exist UNKNOWN_TOPIC_OR_PARTITION, and the rest go on
    denied = {
        t.name
        for t in request.topics
        if not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, t.name)
    }
    unknown = {
        (t.name, p.partition_index)
        for t in request.topics
        for p in t.partitions
        if t.name in denied
        or not 0 <= p.partition_index < (catalog.partition_count(ctx.broker, t.name) or 0)
    }
    offsets = {
        (t.name, p.partition_index): CommittedOffset(
            p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata, now
        )
        for t in request.topics
        for p in t.partitions
        if (t.name, p.partition_index) not in unknown
    }
    error = coord.txns.txn_offset_commit(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        request.group_id,
        offsets,
        member_id=getattr(request, "member_id", "") or "",
        generation_id=getattr(request, "generation_id", -1),
        group_instance_id=getattr(request, "group_instance_id", None),
        now_ms=now,
    )
    error = _fenced_code(error)
    topics = tuple(
        make(
            module.TxnOffsetCommitResponseTopic,
            name=t.name,
            partitions=tuple(
                make(
                    module.TxnOffsetCommitResponsePartition,
                    partition_index=p.partition_index,
                    error_code=ErrorCode.topic_authorization_failed
                    if t.name in denied
                    else ErrorCode.unknown_topic_or_partition
                    if (t.name, p.partition_index) in unknown
                    else error,
                )
                for p in t.partitions
            ),
        )
        for t in request.topics
    )
    return make(module.TxnOffsetCommitResponse, throttle_time=_ZERO, topics=topics)


async def end_txn(ctx: RequestContext, request: Any) -> Any:
    module = response_module(26, ctx.api_version)
    coord = _coord(ctx)
    assert coord.txns is not None
    if not _may_write(ctx, request.transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    else:
        error = coord.txns.end_txn(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            bool(request.committed),
            now_ms=coord.now_ms(),
        )
    return make(module.EndTxnResponse, throttle_time=_ZERO, error_code=_fenced_code(error))


APIS = [
    (22, (0, 4), init_producer_id),
    (24, (0, 3), add_partitions_to_txn),
    (25, (0, 3), add_offsets_to_txn),
    (28, (0, 3), txn_offset_commit),
    (26, (0, 3), end_txn),
]
