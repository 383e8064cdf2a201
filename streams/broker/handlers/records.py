"""DeleteRecords (key 21), v0–v2: advance a partition's log start offset."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import RequestContext
from streams.broker.errors import BrokerError
from streams.broker.handlers import catalog
from streams.broker.protocol import make, response_module
from streams.broker.security.acl import AclOperation, ResourceType

logger = logging.getLogger(__name__)

API_KEY = 21
HIGH_WATERMARK = -1


def _delete(ctx: RequestContext, topic: str, partition: int, offset: int) -> tuple[ErrorCode, int]:
    """(error, new low watermark) for one partition."""
    try:
        log = catalog.get_log(ctx.broker, topic, partition)
    except BrokerError as e:
        return e.error_code, -1
    target = log.high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0 or target > log.high_watermark:
        return ErrorCode.offset_out_of_range, -1
    try:
        start = log.delete_records_before(target)
    except catalog.STORAGE_ERRORS as e:
        return catalog.storage_error_code(e), -1
    logger.info(
        "deleted records of %s-%d before offset %d (log start now %d)",
        topic,
        partition,
        target,
        start,
    )
    return ErrorCode.none, start


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = response_module(API_KEY, ctx.api_version)
    topics = []
    for topic in request.topics:
        parts = []
        deletable = ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            error, low = (
                _delete(ctx, topic.name, int(p.partition_index), int(p.offset))
                if deletable
                else (ErrorCode.topic_authorization_failed, -1)
            )
            parts.append(
                module.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=low, error_code=error
                )
            )
        topics.append(
            make(module.DeleteRecordsTopicResult, name=topic.name, partitions=tuple(parts))
        )
    return make(module.DeleteRecordsResponse, throttle_time=timedelta(0), topics=tuple(topics))


APIS = [(API_KEY, (0, 2), handle)]
