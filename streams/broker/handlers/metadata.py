"""Metadata (key 3), v0–v12: one broker, leader of every partition, leader epoch −1."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import RequestContext
from streams.broker.errors import BrokerError
from streams.broker.handlers import catalog
from streams.broker.protocol import make, response_module

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


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = response_module(API_KEY, ctx.api_version)
    broker = ctx.broker
    allow_create = getattr(request, "allow_auto_topic_creation", True)
    requested = request.topics
    if requested is None or (ctx.api_version == 0 and not requested):
        # null (v1+) or empty (v0) means every topic
        topics = [_topic(module, ctx, name, ErrorCode.none) for name in catalog.topic_names(broker)]
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
            try:
                exists = (
                    catalog.auto_create(broker, name)
                    if allow_create
                    else catalog.partition_count(broker, name) is not None
                )
                error = ErrorCode.none if exists else ErrorCode.unknown_topic_or_partition
            except BrokerError as e:
                error = e.error_code
            topics.append(_topic(module, ctx, name, error))
    node = broker.config.node_id
    brokers = (
        make(
            module.MetadataResponseBroker,
            node_id=node,
            host=broker.config.advertised,
            port=broker.port,
            rack=None,
        ),
    )
    return make(
        module.MetadataResponse,
        throttle_time=timedelta(0),
        brokers=brokers,
        cluster_id=CLUSTER_ID,
        controller_id=node,
        topics=tuple(topics),
        cluster_authorized_operations=_OPS_UNKNOWN,
    )


APIS = [(API_KEY, (0, 12), handle)]
