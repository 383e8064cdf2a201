"""Produce (key 0), v3–v9: append record batches as received; acks 0, 1 and all.

Batches stay bytes from the socket to the segment: kio decodes the request's
topic/partition structure and hands `records` over as one bytes object, the
storage validates CRCs and assigns offsets. With acks=all and a flush policy of
fsync-per-batch the response waits for the group flusher, so all produce
requests arriving in the same interval share one fsync.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import RequestContext
from streams.broker.errors import BrokerError
from streams.broker.extension import Duplicate, Reject
from streams.broker.handlers import catalog
from streams.broker.protocol import make, response_module

logger = logging.getLogger(__name__)

API_KEY = 0


def _partition_response(
    module: Any,
    index: int,
    error: ErrorCode,
    *,
    base_offset: int = -1,
    log_start_offset: int = -1,
    append_time_ms: int = -1,
    message: str | None = None,
) -> Any:
    return make(
        module.PartitionProduceResponse,
        index=index,
        error_code=error,
        base_offset=base_offset,
        log_append_time=(
            datetime.fromtimestamp(append_time_ms / 1000, tz=UTC) if append_time_ms >= 0 else None
        ),
        log_start_offset=log_start_offset,
        record_errors=(),
        error_message=message,
    )


def _append(
    ctx: RequestContext, topic: str, index: int, records: bytes | None, acks: int, txn: str | None
) -> tuple[ErrorCode, int, int, int, str | None, bool]:
    """(error, base offset, log start, append time, message, appended) for one partition."""
    broker = ctx.broker
    try:
        log = catalog.get_log(broker, topic, index)
    except BrokerError as e:
        return e.error_code, -1, -1, -1, None, False
    if catalog.is_internal(broker, topic):
        # the coordinator owns internal topics; a client write would corrupt its state
        message = f"Cannot append to internal topic `{topic}`."
        return ErrorCode.invalid_topic_exception, -1, -1, -1, message, False
    if not records:
        return ErrorCode.corrupt_message, -1, -1, -1, "empty record set", False
    view = memoryview(records)
    check = broker.extension.check_produce(topic, index, view, transactional_id=txn, acks=acks)
    if isinstance(check, Duplicate):
        return (
            ErrorCode.none,
            check.base_offset,
            log.log_start_offset,
            check.log_append_time_ms,
            None,
            False,
        )
    if isinstance(check, Reject):
        return ErrorCode(check.error_code), -1, -1, -1, check.message, False
    try:
        info = log.append(records)
    except catalog.CORRUPT_ERRORS as e:
        logger.warning(
            "rejected produce to %s-%d from %s: %s", topic, index, ctx.connection.peer, e
        )
        return ErrorCode.corrupt_message, -1, -1, -1, catalog.storage_error_message(e), False
    except catalog.TOO_LARGE_ERRORS as e:
        return ErrorCode.message_too_large, -1, -1, -1, catalog.storage_error_message(e), False
    except OSError as e:
        logger.error("append to %s-%d failed: %s", topic, index, e)
        return ErrorCode.kafka_storage_error, -1, -1, -1, str(e), False
    broker.extension.on_appended(topic, index, view, info.base_offset, info.last_offset)
    broker.notifier.notify(topic, index)
    logger.debug("appended %s-%d offsets %d..%d", topic, index, info.base_offset, info.last_offset)
    return (
        ErrorCode.none,
        info.base_offset,
        info.log_start_offset,
        info.log_append_time_ms,
        None,
        True,
    )


def _fail_all(module: Any, responses: list[Any], error: ErrorCode) -> list[Any]:
    return [
        make(
            module.TopicProduceResponse,
            name=t.name,
            partition_responses=tuple(
                _partition_response(
                    module, p.index, error if p.error_code == ErrorCode.none else p.error_code
                )
                for p in t.partition_responses
            ),
        )
        for t in responses
    ]


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = response_module(API_KEY, ctx.api_version)
    acks = int(request.acks)
    txn = request.transactional_id
    responses = []
    sync_appends = False
    for topic_data in request.topic_data:
        partitions = []
        for pdata in topic_data.partition_data:
            if acks not in (0, 1, -1):
                partitions.append(
                    _partition_response(module, pdata.index, ErrorCode.invalid_required_acks)
                )
                continue
            error, base, start, append_ms, message, appended = _append(
                ctx, topic_data.name, pdata.index, pdata.records, acks, txn
            )
            if appended and catalog.needs_fsync(ctx.broker, topic_data.name):
                sync_appends = True
            partitions.append(
                _partition_response(
                    module,
                    pdata.index,
                    error,
                    base_offset=base,
                    log_start_offset=start,
                    append_time_ms=append_ms,
                    message=message,
                )
            )
        responses.append(
            make(
                module.TopicProduceResponse,
                name=topic_data.name,
                partition_responses=tuple(partitions),
            )
        )
    if sync_appends:
        # durability=sync: the high watermark only moves on fsync, so every
        # append schedules the group flush; only acks=all waits for it.
        flushed = ctx.broker.flusher.flush()
        if acks == -1:
            try:
                await asyncio.shield(flushed)
            except OSError as e:
                logger.error("fsync for a produce from %s failed: %s", ctx.connection.peer, e)
                responses = _fail_all(module, responses, ErrorCode.kafka_storage_error)
        else:
            ctx.broker.flusher.detach(flushed)
    if acks == 0:
        return None
    return make(module.ProduceResponse, responses=tuple(responses), throttle_time=timedelta(0))


APIS = [(API_KEY, (3, 9), handle)]
