"""Metadata (key 3), v0–v12, and DescribeTopicPartitions (key 75), v0: one broker,
leader of every partition, leader epoch −1.

DescribeTopicPartitions is how Kafka 4.x admin clients describe topics (they fall back
to Metadata when a broker lacks it). Its answer is Metadata's plus the eligible leader
replicas (KIP-966), which are empty here as on any cluster whose replicas are in sync,
and it pages: at most `response_partition_limit` partitions (capped at 2000, Kafka's
`max.request.partition.size.limit`) per response, with a cursor saying where the
next request starts.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import RequestContext
from streams.broker.errors import BrokerError
from streams.broker.handlers import catalog
from streams.broker.protocol import make, response_module
from streams.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 3
CLUSTER_ID = "streams-broker"
# Topic-level operations bitfield is "unknown" (-2147483648) unless authorizers exist.
_OPS_UNKNOWN = -(2**31)


def _topic(module: Any, ctx: RequestContext, name: str, error: ErrorCode) -> Any:
    node = ctx.broker.config.node_id
    partitions: tuple[Any, ...] = ()
    if error is ErrorCode.none:
        count = catalog.partition_count(ctx.broker, name) or 0
        partitions = tuple(
            make(
                module.MetadataResponsePartition,
                error_code=ErrorCode.none,
                partition_index=i,
                leader_id=node,
                leader_epoch=-1,
                replica_nodes=(node,),
                isr_nodes=(node,),
                offline_replicas=(),
            )
            for i in range(count)
        )
    return make(
        module.MetadataResponseTopic,
        error_code=error,
        name=name,
        topic_id=catalog.topic_id(ctx.broker, name)
        if error is ErrorCode.none
        else catalog.ZERO_UUID,
        is_internal=catalog.is_internal(ctx.broker, name),
        partitions=partitions,
        topic_authorized_operations=_OPS_UNKNOWN,
    )


def _named_topic(ctx: RequestContext, name: str, allow_create: bool) -> ErrorCode:
    """A topic asked for by name: its error, after creating it when asked and allowed.

    As Kafka: a topic the principal may not describe is TOPIC_AUTHORIZATION_FAILED whether
    it exists or not, and creating one on demand takes CREATE on the cluster or the topic."""
    broker = ctx.broker
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return ErrorCode.topic_authorization_failed
    try:
        if catalog.partition_count(broker, name) is not None:
            return ErrorCode.none
        if not allow_create or not broker.config.auto_create_topics:
            return ErrorCode.unknown_topic_or_partition
        may_create = ctx.authorized(
            AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
        ) or ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC, name)
        if not may_create:
            return ErrorCode.topic_authorization_failed
        catalog.auto_create(broker, name)
        return ErrorCode.none
    except BrokerError as e:
        return e.error_code


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = response_module(API_KEY, ctx.api_version)
    broker = ctx.broker
    allow_create = getattr(request, "allow_auto_topic_creation", True)
    requested = request.topics
    if requested is None or (ctx.api_version == 0 and not requested):
        # null (v1+) or empty (v0) means every topic: those the principal may describe
        topics = [
            _topic(module, ctx, name, ErrorCode.none)
            for name in catalog.topic_names(broker)
            if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_denied=False)
        ]
    else:
        topics = []
        for entry in requested:
            name = entry if isinstance(entry, str) else entry.name
            if name is None:
                wanted = getattr(entry, "topic_id", None)
                name = catalog.topic_by_id(broker, wanted) if wanted else None
                if name is None:
                    topics.append(
                        make(
                            module.MetadataResponseTopic,
                            error_code=ErrorCode.unknown_topic_id,
                            name=None,
                            topic_id=wanted or catalog.ZERO_UUID,
                            partitions=(),
                        )
                    )
                    continue
            topics.append(_topic(module, ctx, name, _named_topic(ctx, name, allow_create)))
    node = broker.config.node_id
    host, port = ctx.advertised()
    brokers = (make(module.MetadataResponseBroker, node_id=node, host=host, port=port, rack=None),)
    return make(
        module.MetadataResponse,
        throttle_time=timedelta(0),
        brokers=brokers,
        cluster_id=CLUSTER_ID,
        controller_id=node,
        topics=tuple(topics),
        cluster_authorized_operations=_OPS_UNKNOWN,
    )


DESCRIBE_TOPIC_PARTITIONS = 75
PARTITION_LIMIT = 2000


def _described(module: Any, ctx: RequestContext, name: str, first: int, limit: int) -> Any:
    """One topic of a DescribeTopicPartitions answer, partitions `first` .. `first+limit-1`."""
    node = ctx.broker.config.node_id
    count = catalog.partition_count(ctx.broker, name)
    if count is None:
        return _unavailable(module, name, ErrorCode.unknown_topic_or_partition)
    partitions = tuple(
        make(
            module.DescribeTopicPartitionsResponsePartition,
            error_code=ErrorCode.none,
            partition_index=i,
            leader_id=node,
            leader_epoch=-1,
            replica_nodes=(node,),
            isr_nodes=(node,),
            eligible_leader_replicas=(),
            last_known_elr=(),
            offline_replicas=(),
        )
        for i in range(first, min(count, first + limit))
    )
    return make(
        module.DescribeTopicPartitionsResponseTopic,
        error_code=ErrorCode.none,
        name=name,
        topic_id=catalog.topic_id(ctx.broker, name),
        is_internal=catalog.is_internal(ctx.broker, name),
        partitions=partitions,
        topic_authorized_operations=_OPS_UNKNOWN,
    )


def _unavailable(module: Any, name: str, error: ErrorCode) -> Any:
    return make(
        module.DescribeTopicPartitionsResponseTopic,
        error_code=error,
        name=name,
        topic_id=catalog.ZERO_UUID,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=_OPS_UNKNOWN,
    )


async def describe_topic_partitions(ctx: RequestContext, request: Any) -> Any:
    """Topics by name (every topic when none is named), sorted, from the cursor on; the
    cursor of the next page when the partition limit cuts the answer short."""
    module = response_module(DESCRIBE_TOPIC_PARTITIONS, ctx.api_version)
    broker = ctx.broker
    if request.topics:
        names = sorted({t.name for t in request.topics})
        denied = {
            n for n in names if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, n)
        }
    else:  # every topic the principal may describe
        names = [
            n
            for n in catalog.topic_names(broker)
            if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, n, log_denied=False)
        ]
        denied = set()
    cursor = request.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    budget = max(1, min(int(request.response_partition_limit), PARTITION_LIMIT))
    topics, next_cursor = [], None
    for name in names:
        if name in denied:
            topics.append(_unavailable(module, name, ErrorCode.topic_authorization_failed))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        count = catalog.partition_count(broker, name)
        if count is not None and budget == 0:
            next_cursor = make(module.Cursor, topic_name=name, partition_index=first)
            break
        topic = _described(module, ctx, name, first, budget)
        topics.append(topic)
        if count is not None:
            budget -= len(topic.partitions)
            if first + len(topic.partitions) < count:
                next_cursor = make(
                    module.Cursor,
                    topic_name=name,
                    partition_index=first + len(topic.partitions),
                )
                break
    return make(
        module.DescribeTopicPartitionsResponse,
        throttle_time=timedelta(0),
        topics=tuple(topics),
        next_cursor=next_cursor,
    )


APIS = [
    (API_KEY, (0, 12), handle),
    (DESCRIBE_TOPIC_PARTITIONS, (0, 0), describe_topic_partitions),
]
