"""Errors of the command line itself: what was asked cannot be carried out as given."""

from __future__ import annotations

from warehouse.errors import WarehouseError


class UsageError(WarehouseError):
    """A command line that cannot be carried out as given."""

    exit_code = 2


class TopicInputError(UsageError):
    """`warehouse produce`: a line of the input is not what the command needs."""

    def __init__(self, message: str, *, source: str, lines: list[int]) -> None:
        super().__init__(message)
        self.source = source
        self.lines = lines


class ConsumeError(WarehouseError):
    """`warehouse consume` could not read the topic."""

    def __init__(self, message: str, *, topic: str) -> None:
        super().__init__(message)
        self.topic = topic
