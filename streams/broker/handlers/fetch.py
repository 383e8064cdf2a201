"""Fetch (key 1), v4–v12: long polling, byte limits, read_committed via the LSO hook.

Bytes read from the segments go into the response untouched. A partition's
record set of at least `SENDFILE_MIN_BYTES` stays in the segment files
(`FileRecords`) and the connection sends it with `sendfile`, page cache to
socket; smaller ones are read into memory, where a copy costs less than the
extra system calls. A fetch that finds fewer than `min_bytes` waits on append
notifications for its partitions until `max_wait`; it answers as soon as enough
data is there. One response carries at most the smaller of the request's
`max_bytes` and the broker's `fetch.max.bytes` (4 MiB by default); when that is
below `min_bytes`, the bytes readable count, as in Kafka's delayed fetch. Like
Kafka, the first partition with data returns at least one whole batch even when
it exceeds the byte limits, so a consumer can always make progress; every later
partition stays within `partition_max_bytes` and what is left of the response's
bytes (a batch that does not fit is not returned).
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import RequestContext
from streams.broker.errors import BrokerError, KafkaStorageError
from streams.broker.handlers import catalog
from streams.broker.protocol import make, response_module
from streams.broker.security.acl import AclOperation, ResourceType

logger = logging.getLogger(__name__)

API_KEY = 1
READ_COMMITTED = 1
SENDFILE_MIN_BYTES = 64 * 1024


def _records(
    log: Any, offset: int, max_bytes: int, upper: int, opened: list[Any], *, min_one: bool
) -> Any:
    records = log.read_records(offset, max_bytes, max_offset=upper, min_one=min_one)
    if len(records) >= SENDFILE_MIN_BYTES:
        opened.append(records)
        return records
    with records:
        return bytes(records)


def _read_all(
    ctx: RequestContext, request: Any, module: Any, opened: list[Any], denied: set[str]
) -> tuple[list[Any], int]:
    """Partition data for every requested partition; `FileRecords` put in the
    response are also appended to `opened` (the caller closes them if unsent)."""
    broker = ctx.broker
    ext = broker.extension
    committed = int(getattr(request, "isolation_level", 0)) == READ_COMMITTED
    remaining = min(int(request.max_bytes), broker.config.fetch_max_bytes)
    total = 0
    topics = []
    for ftopic in request.topics:
        name = ftopic.topic
        parts = []
        for fp in ftopic.partitions:
            index = int(fp.partition)
            offset = int(fp.fetch_offset)
            if name in denied:
                parts.append(_empty(module, index, ErrorCode.topic_authorization_failed))
                continue
            try:
                log = catalog.get_log(broker, name, index)
            except BrokerError as e:
                parts.append(_empty(module, index, e.error_code))
                continue
            hwm = log.high_watermark
            start = log.log_start_offset
            lso = ext.last_stable_offset(name, index, hwm) if committed else hwm
            if offset < start or offset > log.log_end_offset:
                parts.append(_empty(module, index, ErrorCode.offset_out_of_range, hwm, lso, start))
                continue
            upper = lso if committed else hwm
            data: Any = b""
            limit = min(int(fp.partition_max_bytes), remaining)
            if offset < upper and (limit > 0 or total == 0):
                # Kafka's minOneMessage: until a partition returned data, one batch goes
                # out whatever the limits (so a consumer always progresses); after that
                # max_bytes and partition_max_bytes hold
                try:
                    data = _records(log, offset, max(limit, 1), upper, opened, min_one=total == 0)
                except KafkaStorageError as e:  # the log dir went offline since get_log
                    parts.append(_empty(module, index, e.error_code))
                    continue
                total += len(data)
                remaining = max(0, remaining - len(data))
            aborted = None
            if committed:
                aborted = tuple(
                    module.AbortedTransaction(producer_id=pid, first_offset=first)
                    for pid, first in ext.aborted_transactions(name, index, offset, upper)
                )
            parts.append(
                make(
                    module.PartitionData,
                    partition_index=index,
                    error_code=ErrorCode.none,
                    high_watermark=hwm,
                    last_stable_offset=lso,
                    log_start_offset=start,
                    aborted_transactions=aborted,
                    preferred_read_replica=-1,
                    records=data,
                )
            )
        topics.append(make(module.FetchableTopicResponse, topic=name, partitions=tuple(parts)))
    return topics, total


def _available(ctx: RequestContext, request: Any, denied: set[str]) -> int:
    """Bytes readable for the request, each partition's up to its `partition_max_bytes`.

    Like Kafka's delayed fetch, `min_bytes` counts what is there to read, not what one
    response may carry (`fetch.max.bytes` can be below a client's `fetch.min.bytes`)."""
    broker = ctx.broker
    committed = int(getattr(request, "isolation_level", 0)) == READ_COMMITTED
    available = 0
    for ftopic in request.topics:
        if ftopic.topic in denied:
            continue
        for fp in ftopic.partitions:
            try:
                log = catalog.get_log(broker, ftopic.topic, int(fp.partition))
            except BrokerError:
                continue
            hwm = log.high_watermark
            upper = (
                broker.extension.last_stable_offset(ftopic.topic, int(fp.partition), hwm)
                if committed
                else hwm
            )
            offset = int(fp.fetch_offset)
            if log.log_start_offset <= offset < upper:
                with log.read_records(
                    offset, max(int(fp.partition_max_bytes), 1), max_offset=upper
                ) as r:
                    available += len(r)
    return available


def _empty(
    module: Any, index: int, error: ErrorCode, hwm: int = -1, lso: int = -1, start: int = -1
) -> Any:
    return make(
        module.PartitionData,
        partition_index=index,
        error_code=error,
        high_watermark=hwm,
        last_stable_offset=lso,
        log_start_offset=start,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=b"",  # never null: librdkafka rejects a null record set ("MessageSetSize -1")
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = response_module(API_KEY, ctx.api_version)
    max_wait = request.max_wait
    wait_s = max_wait.total_seconds() if isinstance(max_wait, timedelta) else int(max_wait) / 1000
    # capped: a client that vanished must not pin a request for 24 days
    wait_s = min(max(0.0, wait_s), ctx.broker.config.fetch_max_wait_ms / 1000)
    deadline = time.monotonic() + wait_s
    min_bytes = int(request.min_bytes)
    budget = min(int(request.max_bytes), ctx.broker.config.fetch_max_bytes)
    # Kafka's READ on each topic, asked once: a long poll does not ask again
    denied = {
        t.topic
        for t in request.topics
        if not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, t.topic)
    }
    watched = [
        (t.topic, int(p.partition))
        for t in request.topics
        if t.topic not in denied
        for p in t.partitions
    ]
    while True:
        opened: list[Any] = []
        topics, total = _read_all(ctx, request, module, opened, denied)
        left = deadline - time.monotonic()
        if total >= min_bytes or left <= 0 or not watched:
            break
        if budget < min_bytes and _available(ctx, request, denied) >= min_bytes:
            break  # the response is as full as it can be: waiting adds nothing to it
        for records in opened:  # read again after the wait
            records.close()
        await ctx.broker.notifier.wait(watched, left)
    return make(
        module.FetchResponse,
        throttle_time=timedelta(0),
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(topics),
    )


APIS = [(API_KEY, (4, 12), handle)]
