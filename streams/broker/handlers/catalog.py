"""Topic lookups shared by the handlers, over the storage `LogManager`.

One place that knows how the storage reports topics, so handlers stay small;
also topic creation on demand (`auto.create.topics.enable`).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import BrokerContext
from streams.broker.errors import (
    BrokerError,
    CorruptMessageError,
    InvalidRequestError,
    KafkaStorageError,
    MessageTooLargeError,
    UnknownTopicOrPartitionError,
)
from streams.broker.storage import LogConfig, validate_topic_name

logger = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)

__all__ = [
    "CORRUPT_ERRORS",
    "STORAGE_ERRORS",
    "TOO_LARGE_ERRORS",
    "InvalidRequestError",
    "alter_topic_configs",
    "auto_create",
    "create_topic",
    "get_log",
    "is_compacted",
    "max_timestamp",
    "needs_fsync",
    "partition_count",
    "storage_error_code",
    "storage_error_message",
    "topic_configs",
    "topic_names",
    "validate_topic_configs",
    "validate_topic_name",
    "topic_id",
    "topic_by_id",
    "is_internal",
    "ZERO_UUID",
]

CORRUPT_ERRORS: tuple[type[Exception], ...] = (CorruptMessageError,)
TOO_LARGE_ERRORS: tuple[type[Exception], ...] = (MessageTooLargeError,)
STORAGE_ERRORS: tuple[type[Exception], ...] = (BrokerError, OSError)


def topic_id(broker: BrokerContext, topic: str) -> uuid.UUID:
    """The topic's id (all zeros when unknown)."""
    info = broker.logs.find_topic(topic)
    raw = getattr(info, "topic_id", None)
    try:
        return uuid.UUID(hex=raw) if raw else ZERO_UUID
    except ValueError:
        return ZERO_UUID


def topic_by_id(broker: BrokerContext, wanted: uuid.UUID) -> str | None:
    for name, info in broker.logs.topics().items():
        if name in HIDDEN_TOPICS:
            continue
        raw = getattr(info, "topic_id", None)
        if raw and raw.replace("-", "") == wanted.hex:
            return name
    return None


INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# The broker's metadata log (SCRAM credentials, ACLs): as Kafka's `__cluster_metadata`, no
# client lists, reads, writes, creates or deletes it; to them it does not exist.
HIDDEN_TOPICS = frozenset({"__cluster_metadata"})


def is_internal(broker: BrokerContext, topic: str) -> bool:
    """Kafka's internal topics, or any the storage marks internal."""
    if topic in INTERNAL_TOPICS:
        return True
    info = broker.logs.find_topic(topic)
    return bool(getattr(info, "internal", False))


def storage_error_code(error: Exception) -> ErrorCode:
    """The protocol code of a storage exception (KAFKA_STORAGE_ERROR for I/O errors)."""
    if isinstance(error, BrokerError):
        try:
            return ErrorCode(error.errno)
        except ValueError:
            return ErrorCode.unknown_server_error
    return ErrorCode.kafka_storage_error


def storage_error_message(error: Exception) -> str:
    """What a response's error message says about a storage exception: its detail."""
    if isinstance(error, BrokerError) and error.detail:
        return error.detail
    return str(error)


def _config_of(broker: BrokerContext, topic: str) -> LogConfig:
    config = broker.logs.topic_config(topic)
    if isinstance(config, LogConfig):
        return config
    return broker.logs.default_config.with_changes(dict(config))


def topic_configs(broker: BrokerContext, topic: str) -> tuple[dict[str, str], set[str]]:
    """(every effective config, the keys overridden for this topic) of an existing topic."""
    if partition_count(broker, topic) is None:
        raise UnknownTopicOrPartitionError(f"topic `{topic}` does not exist")
    config = _config_of(broker, topic)
    return config.to_kafka(), set(config.overrides(broker.logs.default_config))


def validate_topic_configs(broker: BrokerContext, configs: dict[str, str]) -> dict[str, str]:
    """The effective configs a new topic would get; `InvalidConfigError` naming the bad key."""
    return broker.logs.default_config.with_changes(configs).to_kafka()


def alter_topic_configs(
    broker: BrokerContext, topic: str, changes: dict[str, str | None], *, validate_only: bool
) -> None:
    if partition_count(broker, topic) is None:
        raise UnknownTopicOrPartitionError(f"topic `{topic}` does not exist")
    try:
        _config_of(broker, topic).with_changes(changes)
        if not validate_only:
            broker.logs.alter_topic_config(topic, changes)
    except OSError as e:
        raise KafkaStorageError(str(e)) from e


def is_compacted(broker: BrokerContext, topic: str) -> bool:
    """True when `topic`'s cleanup.policy includes compact (every record needs a key)."""
    return _config_of(broker, topic).compact


def needs_fsync(broker: BrokerContext, topic: str) -> bool:
    """True when acks=all on `topic` must wait for an fsync (durability=sync)."""
    return _config_of(broker, topic).durability == "sync"


def max_timestamp(log: Any) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record with the largest timestamp (ListOffsets −3)."""
    segments = [seg for seg in log.segments if seg.max_timestamp >= 0]
    if not segments:
        return None
    latest = max(seg.max_timestamp for seg in segments)
    return log.offset_for_timestamp(latest)


def topic_names(broker: BrokerContext) -> list[str]:
    return sorted(t for t in broker.logs.topics() if t not in HIDDEN_TOPICS)


def partition_count(broker: BrokerContext, topic: str) -> int | None:
    """Number of partitions of `topic`, or None when it does not exist (or is hidden)."""
    if topic in HIDDEN_TOPICS:
        return None
    info = broker.logs.find_topic(topic)
    if info is None:
        return None
    return int(getattr(info, "partitions", info))


def get_log(broker: BrokerContext, topic: str, partition: int) -> Any:
    """The partition's log; `UnknownTopicOrPartitionError` when there is none."""
    count = partition_count(broker, topic)
    if count is None or not 0 <= partition < count:
        raise UnknownTopicOrPartitionError(f"`{topic}` partition {partition}")
    return broker.logs.get_log(topic, partition)


def auto_create(broker: BrokerContext, topic: str) -> bool:
    """Create `topic` with the default partition count if allowed; True if it exists now.

    Raises `InvalidTopicError` when the name is not a legal topic name.
    """
    if partition_count(broker, topic) is not None:
        return True
    if not broker.config.auto_create_topics:
        return False
    create_topic(broker, topic, broker.config.num_partitions, {})
    logger.info("auto-created topic %s with %d partition(s)", topic, broker.config.num_partitions)
    return True


def create_topic(
    broker: BrokerContext, topic: str, partitions: int, configs: dict[str, str]
) -> None:
    validate_topic_name(topic)
    if topic in HIDDEN_TOPICS:
        raise InvalidRequestError(f"Creation of internal topic `{topic}` is prohibited.")
    try:
        broker.logs.create_topic(topic, partitions, configs)
    except OSError as e:
        raise KafkaStorageError(str(e)) from e
