"""ListOffsets (key 2), v1–v7: earliest (−2), latest (−1), max timestamp (−3), by timestamp."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import RequestContext
from streams.broker.errors import BrokerError
from streams.broker.handlers import catalog
from streams.broker.protocol import make, response_module
from streams.broker.security.acl import AclOperation, ResourceType

API_KEY = 2
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
READ_COMMITTED = 1


def _lookup(
    ctx: RequestContext, topic: str, partition: int, ts: int, committed: bool
) -> tuple[ErrorCode, int, int]:
    """(error, offset, timestamp) for one partition."""
    try:
        log = catalog.get_log(ctx.broker, topic, partition)
    except BrokerError as e:
        return e.error_code, -1, -1
    if ts == EARLIEST:
        return ErrorCode.none, log.log_start_offset, -1
    if ts == LATEST:
        hwm = log.high_watermark
        if committed:
            return (
                ErrorCode.none,
                ctx.broker.extension.last_stable_offset(topic, partition, hwm),
                -1,
            )
        return ErrorCode.none, hwm, -1
    if ts == MAX_TIMESTAMP:
        found = catalog.max_timestamp(log)
    elif ts < 0:
        return ErrorCode.invalid_request, -1, -1
    else:
        found = log.offset_for_timestamp(ts)
    if found is None:
        return ErrorCode.none, -1, -1
    offset, timestamp = found
    return ErrorCode.none, int(offset), int(timestamp)


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = response_module(API_KEY, ctx.api_version)
    committed = int(getattr(request, "isolation_level", 0)) == READ_COMMITTED
    topics = []
    for topic in request.topics:
        parts = []
        described = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            error, offset, ts = (
                _lookup(ctx, topic.name, int(p.partition_index), int(p.timestamp), committed)
                if described
                else (ErrorCode.topic_authorization_failed, -1, -1)
            )
            parts.append(
                make(
                    module.ListOffsetsPartitionResponse,
                    partition_index=p.partition_index,
                    error_code=error,
                    timestamp=ts,
                    offset=offset,
                    leader_epoch=-1,
                )
            )
        topics.append(
            make(module.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(parts))
        )
    return make(module.ListOffsetsResponse, throttle_time=timedelta(0), topics=tuple(topics))


APIS = [(API_KEY, (1, 7), handle)]
