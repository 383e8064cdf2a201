"""Errors of the broker's storage layer.

Each class carries the Kafka protocol error code it maps to as `errno`, so the
protocol layer can answer with `type(err).errno` (aiokafka style), and
`StorageError.for_code(errno)` finds the class back. Messages name what failed,
the offending value in backticks, and what to do.
"""

from __future__ import annotations

from typing import ClassVar


class StorageError(Exception):
    """Base class of the storage layer's errors (`errno` -1: UNKNOWN_SERVER_ERROR)."""

    errno: ClassVar[int] = -1
    _registry: ClassVar[dict[int, type[StorageError]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        StorageError._registry.setdefault(cls.errno, cls)

    def __init__(
        self,
        message: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.topic = topic
        self.partition = partition
        self.path = path

    def __str__(self) -> str:
        return self.message

    @classmethod
    def for_code(cls, errno: int) -> type[StorageError]:
        """The error class for a Kafka error code (StorageError when unknown)."""
        return cls._registry.get(errno, StorageError)


class OffsetOutOfRangeError(StorageError):
    """A read or lookup asked for an offset outside [log start, log end]."""

    errno = 1


class CorruptRecordError(StorageError):
    """A record batch failed validation: bad length, magic, CRC or offsets."""

    errno = 2


class UnknownTopicOrPartitionError(StorageError):
    errno = 3


class InvalidTopicError(StorageError):
    """A topic name Kafka would reject (or one that could escape the data directory)."""

    errno = 17


class RecordTooLargeError(StorageError):
    errno = 18


class InvalidPartitionsError(StorageError):
    errno = 37


class TopicExistsError(StorageError):
    errno = 36


class InvalidConfigError(StorageError):
    """A topic/log config value is missing, of the wrong type or out of range."""

    errno = 40

    def __init__(self, message: str, *, key: str | None = None, **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.key = key


class InvalidTxnStateError(StorageError):
    """A transaction marker or aborted-transaction entry that contradicts the log."""

    errno = 48


class KafkaStorageError(StorageError):
    """An I/O error of the log files (disk full, permissions)."""

    errno = 56
