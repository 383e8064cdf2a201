"""Broker error codes as exception classes, aiokafka-style: the one registry.

Every Kafka protocol error the broker raises or answers with is a `BrokerError`
subclass carrying its protocol `errno`, named after Kafka's error code
(`CORRUPT_MESSAGE` -> `CorruptMessageError`); `for_code(errno)` maps a code
received or sent on the wire back to its class. The storage layer raises these
too (with `topic`, `partition`, `path` set where known), so a storage failure
reaches the handlers already carrying its code. Handlers catch these and answer
with their `errno` in the response's error field; a `BrokerError` that escapes a
handler is a bug in it, and the server closes that connection (`FrameError`).

Codes the broker does not name here still resolve through `for_code`: a class
is created on first use from kio's `ErrorCode` table, so a code is never lost.
"""

from __future__ import annotations

from typing import Any, ClassVar

from kio.schema.errors import ErrorCode

__all__ = [
    "BrokerError",
    "UnknownServerError",
    "OffsetOutOfRangeError",
    "CorruptMessageError",
    "UnknownTopicOrPartitionError",
    "RequestTimedOutError",
    "MessageTooLargeError",
    "InvalidTopicError",
    "RecordListTooLargeError",
    "InvalidRequiredAcksError",
    "UnsupportedVersionError",
    "TopicAlreadyExistsError",
    "InvalidPartitionsError",
    "InvalidReplicationFactorError",
    "InvalidConfigError",
    "InvalidRequestError",
    "PolicyViolationError",
    "InvalidTxnStateError",
    "KafkaStorageError",
    "UnsupportedCompressionTypeError",
    "UnknownTopicIdError",
    "for_code",
]

_REGISTRY: dict[int, type[BrokerError]] = {}


class BrokerError(Exception):
    """A Kafka protocol error: `errno` is the code sent to clients.

    `detail` says what failed (the offending value in backticks); `topic`,
    `partition` and `path` name the storage object involved, when there is one.
    """

    errno: ClassVar[int] = -1
    retriable: ClassVar[bool] = False
    message: ClassVar[str] = "unknown server error"

    def __init__(
        self,
        detail: str | None = None,
        *,
        topic: str | None = None,
        partition: int | None = None,
        path: str | None = None,
    ) -> None:
        self.detail = detail
        self.topic = topic
        self.partition = partition
        self.path = path
        text = f"[Error {self.errno}] {type(self).__name__}: {self.message}"
        super().__init__(f"{text}: {detail}" if detail else text)

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "errno" in cls.__dict__:
            _REGISTRY[cls.errno] = cls

    @property
    def error_code(self) -> ErrorCode:
        """The code as kio's enum, ready for a response field."""
        return ErrorCode(self.errno)


class UnknownServerError(BrokerError):
    errno = -1
    message = "the server experienced an unexpected error"


class OffsetOutOfRangeError(BrokerError):
    errno = 1
    message = "the requested offset is outside the partition's range"


class CorruptMessageError(BrokerError):
    errno = 2
    retriable = True
    message = "a record batch failed its CRC or size checks"


class UnknownTopicOrPartitionError(BrokerError):
    errno = 3
    retriable = True
    message = "this broker does not host this topic-partition"


class RequestTimedOutError(BrokerError):
    errno = 7
    retriable = True
    message = "the request timed out"


class MessageTooLargeError(BrokerError):
    errno = 10
    message = "the request included a message larger than the server accepts"


class InvalidTopicError(BrokerError):
    errno = 17
    message = "the topic name is invalid"


class RecordListTooLargeError(BrokerError):
    errno = 18
    message = "the record batch is larger than the segment size"


class InvalidRequiredAcksError(BrokerError):
    errno = 21
    message = "acks must be 0, 1 or -1 (all)"


class UnsupportedVersionError(BrokerError):
    errno = 35
    message = "the broker does not support this API version"


class TopicAlreadyExistsError(BrokerError):
    errno = 36
    message = "the topic already exists"


class InvalidPartitionsError(BrokerError):
    errno = 37
    message = "the number of partitions is invalid"


class InvalidReplicationFactorError(BrokerError):
    errno = 38
    message = "the replication factor is invalid (this single-node broker supports 1)"


class InvalidConfigError(BrokerError):
    """A topic/log config value is missing, of the wrong type or out of range; `key` names it."""

    errno = 40
    message = "the configuration is invalid"

    def __init__(self, detail: str | None = None, *, key: str | None = None, **kwargs: Any) -> None:
        super().__init__(detail, **kwargs)
        self.key = key


class InvalidRequestError(BrokerError):
    errno = 42
    message = "the request is malformed or not allowed"


class PolicyViolationError(BrokerError):
    errno = 44
    message = "the request violates the broker's policy"


class InvalidTxnStateError(BrokerError):
    """A transaction marker or aborted-transaction entry that contradicts the log."""

    errno = 48
    message = "the producer attempted a transactional operation in an invalid state"


class KafkaStorageError(BrokerError):
    """An I/O error of the log files (disk full, permissions), or a log already closed."""

    errno = 56
    retriable = True
    message = "disk error when trying to access the log file"


class UnsupportedCompressionTypeError(BrokerError):
    """A batch uses a codec this Python cannot decompress (install the codec's package).

    Only raised where the broker itself decodes records (compaction, timestamp lookups).
    """

    errno = 76
    message = "the batch's compression codec is not available to the broker"


class UnknownTopicIdError(BrokerError):
    errno = 100
    retriable = True
    message = "this broker does not know the topic id"


def for_code(errno: int) -> type[BrokerError]:
    """The `BrokerError` class of a protocol error code (0 has none: it is success).

    Raises `ValueError` for 0 and for codes Kafka does not define.
    """
    cls = _REGISTRY.get(errno)
    if cls is not None:
        return cls
    if errno == 0:
        raise ValueError("error code `0` means success; there is no error class for it")
    try:
        code = ErrorCode(errno)
    except ValueError:
        raise ValueError(
            f"`{errno}` is not a Kafka protocol error code (see kio.schema.errors.ErrorCode)"
        ) from None
    name = "".join(part.capitalize() for part in code.name.split("_")) + "Error"
    doc = code.name.replace("_", " ")
    return type(
        name,
        (BrokerError,),
        {"errno": errno, "retriable": code.retriable, "message": doc, "__module__": __name__},
    )
