"""Errors of `streams.cdc` (SCD2 errors are `streams.delta` errors: SCD2 is a Delta sink mode).

`streams` never imports `warehouse`, so these do not derive from `WarehouseError`;
the framework wraps them at its boundary.
"""

from __future__ import annotations


class CdcError(Exception):
    """Root of the errors raised by publishing and reading changelog topics."""

    def __init__(self, message: str, *, topic: str | None = None, table: str | None = None):
        super().__init__(message)
        self.message = message
        self.topic = topic
        self.table = table

    def __str__(self) -> str:
        return self.message


class PublishError(CdcError):
    """A table's changes could not be published to its topic (`topic`, `table`)."""


class KTableError(CdcError):
    """A changelog topic could not be read back into a table (`topic`)."""
