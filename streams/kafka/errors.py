"""Errors of the Kafka side of `streams`.

`streams` never imports `warehouse`, so these do not derive from `WarehouseError`;
the framework wraps them at its boundary. Each carries structured attributes.
"""

from __future__ import annotations


class KafkaStreamError(Exception):
    """Root of every error raised by `streams.kafka`."""


class KafkaConfigError(KafkaStreamError):
    """An option of the Kafka source or parser is invalid (`option` names it)."""

    def __init__(self, message: str, *, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class KafkaAdminError(KafkaStreamError):
    """A topic could not be created/queried, or a produced record was not delivered."""

    def __init__(self, message: str, *, topic: str | None = None) -> None:
        super().__init__(message)
        self.topic = topic


class DataLossError(KafkaStreamError):
    """Offsets the query still had to read are gone (retention, topic deleted)."""

    def __init__(
        self,
        message: str,
        *,
        topic: str,
        partition: int,
        expected_offset: int | None = None,
        earliest_offset: int | None = None,
    ) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.expected_offset = expected_offset
        self.earliest_offset = earliest_offset


class KafkaReadError(KafkaStreamError):
    """Reading an offset range failed (broker error, range never reached)."""

    def __init__(self, message: str, *, topic: str, partition: int) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
