"""Produce (key 0), v3–v9: append record batches as received; acks 0, 1 and all.

Batches stay bytes from the socket to the segment: kio decodes the request's
topic/partition structure and hands `records` over as one bytes object, the
storage validates CRCs and assigns offsets. As in Kafka's
`ProduceRequest.validateRecords`, each partition's records must be exactly one
RecordBatch v2; none, an older magic or a second batch is INVALID_RECORD. A
compacted topic's records are walked for their keys, and a batch with a keyless
record is refused with INVALID_RECORD and one record error per such record, as
Kafka's LogValidator does (batches whose codec this Python cannot read are kept
unchecked). With acks=all and a flush policy of fsync-per-batch the response
waits for the group flusher, so all produce requests arriving in the same
interval share one fsync.

Transactional batches are checked first, as Kafka's `KafkaApis.handleProduceRequest` and
`ReplicaManager.handleProduceAppend` do for the whole request: transactional records in a
request without a transactional id are TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and
transactional records of more than one producer id INVALID_PRODUCER_ID_MAPPING, for every
partition of it. Whether each batch belongs to an ongoing transaction that added its
partition is the coordinator's check (`BrokerExtension.check_produce`).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker import storage
from streams.broker.context import RequestContext
from streams.broker.errors import BrokerError, KafkaStorageError, UnsupportedCompressionTypeError
from streams.broker.extension import Duplicate, Reject
from streams.broker.handlers import catalog
from streams.broker.protocol import make, response_module
from streams.broker.security.acl import AclOperation, ResourceType

logger = logging.getLogger(__name__)

API_KEY = 0
# RecordBatch v2 framing: baseOffset int64 then batchLength int32, which counts the
# bytes after itself; the magic byte follows the partitionLeaderEpoch
_LOG_OVERHEAD = 12
_LENGTH_OFFSET = 8
_MAGIC_OFFSET = 16
_MAGIC_V2 = 2
_MIN_RECORD_OVERHEAD = 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class _Appended:
    """The outcome of one partition's append, as its produce response reports it."""

    error: ErrorCode
    base_offset: int = -1
    log_start_offset: int = -1
    append_time_ms: int = -1
    message: str | None = None
    appended: bool = False
    record_errors: tuple[tuple[int, str], ...] = ()


def _partition_response(module: Any, index: int, result: _Appended) -> Any:
    append_ms = result.append_time_ms
    return make(
        module.PartitionProduceResponse,
        index=index,
        error_code=result.error,
        base_offset=result.base_offset,
        log_append_time=(
            datetime.fromtimestamp(append_ms / 1000, tz=UTC) if append_ms >= 0 else None
        ),
        log_start_offset=result.log_start_offset,
        record_errors=tuple(
            module.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
            for i, m in result.record_errors
        )
        if hasattr(module, "BatchIndexAndErrorMessage")  # Produce v8+
        else (),
        error_message=result.message,
    )


def _check_keys(topic: str, index: int, records: memoryview) -> _Appended | None:
    """INVALID_RECORD with one error per keyless record, as Kafka's LogValidator answers
    a produce to a compacted topic; None when every record has a key."""
    try:
        batch, missing = storage.keyless_records(records)
    except UnsupportedCompressionTypeError:
        # the codec is not installed here: the keys cannot be read, the batch is kept
        logger.debug("cannot check the keys of a compressed batch for %s-%d", topic, index)
        return None
    if not missing:
        return None
    per_record = tuple(
        (
            i,
            f"Compacted topic `{topic}` partition {index} cannot accept a record without a "
            "key; give every record a key or change the topic's cleanup.policy.",
        )
        for i in missing
    )
    shown = ", ".join(str(i) for i in missing[:3])
    message = (
        f"One or more records have been rejected due to {len(missing)} record errors in "
        f"total: record(s) {shown}{', ...' if len(missing) > 3 else ''} of batch {batch} have "
        f"no key, which topic `{topic}` (cleanup.policy=compact) requires."
    )
    return _Appended(ErrorCode.invalid_record, message=message, record_errors=per_record)


def _next_batch_size(records: memoryview, pos: int) -> int | None:
    """Bytes of the whole batch at ``pos``; None when no complete batch starts there, -1
    when its header is corrupt (Kafka's ``ByteBufferLogInputStream.nextBatch``: ``null``
    ends the iteration, a corrupt header is CORRUPT_MESSAGE, which the storage answers)."""
    remaining = len(records) - pos
    if remaining < _LOG_OVERHEAD:
        return None
    (length,) = _I32.unpack_from(records, pos + _LENGTH_OFFSET)
    if length < _MIN_RECORD_OVERHEAD:
        return -1
    if remaining <= _MAGIC_OFFSET:
        return None
    if not 0 <= records[pos + _MAGIC_OFFSET] <= _MAGIC_V2:
        return -1
    size = length + _LOG_OVERHEAD
    return size if size <= remaining else None


def _check_one_batch(
    topic: str, index: int, records: bytes | None, version: int
) -> _Appended | None:
    """Kafka's ``ProduceRequest.validateRecords`` (Produce v3+): exactly one complete
    RecordBatch v2 per partition, else INVALID_RECORD; None when the records pass."""
    where = f"partition `{topic}-{index}`"
    view = memoryview(records or b"")
    first = _next_batch_size(view, 0)
    if first is None:
        message = (
            f"Produce requests with version {version} must have at least one record batch "
            f"per partition; {where} got {len(view)} bytes without a whole batch."
        )
        return _Appended(ErrorCode.invalid_record, message=message)
    if first < 0:
        return None
    if view[_MAGIC_OFFSET] != _MAGIC_V2:
        message = (
            f"Produce requests with version {version} are only allowed to contain record "
            f"batches with magic version 2; {where} got magic `{view[_MAGIC_OFFSET]}`."
        )
        return _Appended(ErrorCode.invalid_record, message=message)
    second = _next_batch_size(view, first)
    if second is not None and second > 0:
        message = (
            f"Produce requests with version {version} are only allowed to contain exactly one "
            f"record batch per partition; {where} got more than one. Send one batch per "
            "partition in each request."
        )
        return _Appended(ErrorCode.invalid_record, message=message)
    return None


def _append(
    ctx: RequestContext, topic: str, index: int, records: bytes | None, acks: int, txn: str | None
) -> _Appended:
    broker = ctx.broker
    try:
        log = catalog.get_log(broker, topic, index)
    except BrokerError as e:
        return _Appended(e.error_code)
    refused = _check_one_batch(topic, index, records, ctx.api_version)
    if refused is not None:
        logger.info("refused produce to %s-%d: %s", topic, index, refused.message)
        return refused
    assert records is not None
    if catalog.is_internal(broker, topic):
        # the coordinator owns internal topics; a client write would corrupt its state
        message = f"Cannot append to internal topic `{topic}`."
        return _Appended(ErrorCode.invalid_topic_exception, message=message)
    view = memoryview(records)
    if catalog.is_compacted(broker, topic):
        # before the producer-state check, as Kafka validates records before sequences
        try:
            refused = _check_keys(topic, index, view)
        except catalog.CORRUPT_ERRORS as e:
            return _Appended(ErrorCode.corrupt_message, message=catalog.storage_error_message(e))
        if refused is not None:
            logger.info("refused keyless records for compacted %s-%d", topic, index)
            return refused
    check = broker.extension.check_produce(topic, index, view, transactional_id=txn, acks=acks)
    if isinstance(check, Duplicate):
        return _Appended(
            ErrorCode.none,
            base_offset=check.base_offset,
            log_start_offset=log.log_start_offset,
            append_time_ms=check.log_append_time_ms,
        )
    if isinstance(check, Reject):
        return _Appended(ErrorCode(check.error_code), message=check.message)
    try:
        info = log.append(records)
    except catalog.CORRUPT_ERRORS as e:
        logger.warning(
            "rejected produce to %s-%d from %s: %s", topic, index, ctx.connection.peer, e
        )
        return _Appended(ErrorCode.corrupt_message, message=catalog.storage_error_message(e))
    except catalog.TOO_LARGE_ERRORS as e:
        return _Appended(ErrorCode.message_too_large, message=catalog.storage_error_message(e))
    except (OSError, KafkaStorageError) as e:  # the storage took the log dir offline
        logger.error("append to %s-%d failed: %s", topic, index, e)
        return _Appended(ErrorCode.kafka_storage_error, message=str(e))
    broker.extension.on_appended(topic, index, view, info.base_offset, info.last_offset)
    broker.notifier.notify(topic, index)
    logger.debug("appended %s-%d offsets %d..%d", topic, index, info.base_offset, info.last_offset)
    return _Appended(
        ErrorCode.none,
        base_offset=info.base_offset,
        log_start_offset=info.log_start_offset,
        append_time_ms=info.log_append_time_ms,
        appended=True,
    )


def _transactional_producers(request: Any) -> tuple[bool, set[int]]:
    """Whether any partition's records hold a transactional batch, and the producer ids of
    those batches (Kafka's `RequestUtils.hasTransactionalRecords`). Records that do not
    parse are left to each partition's own checks."""
    found, producer_ids = False, set()
    for topic_data in request.topic_data:
        for pdata in topic_data.partition_data:
            try:
                for header in storage.iter_batches(pdata.records or b""):
                    if header.is_transactional:
                        found = True
                        if header.producer_id >= 0:
                            producer_ids.add(header.producer_id)
            except catalog.CORRUPT_ERRORS:
                continue
    return found, producer_ids


def _refuse_all(module: Any, request: Any, error: ErrorCode, message: str) -> Any:
    topics = tuple(
        make(
            module.TopicProduceResponse,
            name=t.name,
            partition_responses=tuple(
                _partition_response(module, p.index, _Appended(error, message=message))
                for p in t.partition_data
            ),
        )
        for t in request.topic_data
    )
    return make(module.ProduceResponse, responses=topics, throttle_time=timedelta(0))


def _refuse_transactional(ctx: RequestContext, request: Any, module: Any) -> Any | None:
    """The answer to a request whose transactional records Kafka refuses as a whole."""
    transactional, producer_ids = _transactional_producers(request)
    if not transactional:
        return None
    if request.transactional_id is None:
        message = (
            "Transactional records need the producer's transactional id in the request; "
            "this one has none."
        )
        error = ErrorCode.transactional_id_authorization_failed
    elif not ctx.authorized(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        message = "Transactional Id authorization failed."
        error = ErrorCode.transactional_id_authorization_failed
    elif len(producer_ids) > 1:
        shown = ", ".join(f"`{pid}`" for pid in sorted(producer_ids))
        message = f"Transactional records contained more than one producer id: {shown}."
        error = ErrorCode.invalid_producer_id_mapping
    else:
        return None
    logger.warning("refused a produce from %s: %s", ctx.connection.peer, message)
    return _refuse_all(module, request, error, message)


def _fail_all(module: Any, responses: list[Any], error: ErrorCode) -> list[Any]:
    return [
        make(
            module.TopicProduceResponse,
            name=t.name,
            partition_responses=tuple(
                _partition_response(
                    module,
                    p.index,
                    _Appended(error if p.error_code == ErrorCode.none else p.error_code),
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
    refused = _refuse_transactional(ctx, request, module)
    if refused is not None:
        return None if acks == 0 else refused
    responses = []
    sync_appends = False
    for topic_data in request.topic_data:
        partitions = []
        writable = ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, topic_data.name)
        for pdata in topic_data.partition_data:
            if not writable:
                refused = _Appended(ErrorCode.topic_authorization_failed)
                partitions.append(_partition_response(module, pdata.index, refused))
                continue
            if acks not in (0, 1, -1):
                partitions.append(
                    _partition_response(
                        module, pdata.index, _Appended(ErrorCode.invalid_required_acks)
                    )
                )
                continue
            result = _append(ctx, topic_data.name, pdata.index, pdata.records, acks, txn)
            if result.appended and catalog.needs_fsync(ctx.broker, topic_data.name):
                sync_appends = True
            partitions.append(_partition_response(module, pdata.index, result))
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
            except (OSError, KafkaStorageError) as e:
                logger.error("fsync for a produce from %s failed: %s", ctx.connection.peer, e)
                responses = _fail_all(module, responses, ErrorCode.kafka_storage_error)
        else:
            ctx.broker.flusher.detach(flushed)
    if acks == 0:
        return None
    return make(module.ProduceResponse, responses=tuple(responses), throttle_time=timedelta(0))


APIS = [(API_KEY, (3, 9), handle)]
