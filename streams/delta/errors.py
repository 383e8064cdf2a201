"""Errors of the Delta side of `streams`.

`streams` never imports `warehouse`, so these do not derive from `WarehouseError`;
the framework wraps them at its boundary. Each carries the table `path` it is about.
"""

from __future__ import annotations


class DeltaStreamError(Exception):
    """Root of every error raised by `streams.delta`; `path` is the Delta table's location."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path

    def __str__(self) -> str:
        return self.message


class DeltaConfigError(DeltaStreamError):
    """A `DeltaTarget` or reader option is invalid (`option` names it)."""

    def __init__(self, message: str, *, path: str | None = None, option: str | None = None):
        super().__init__(message, path=path)
        self.option = option


class DeltaSchemaError(DeltaStreamError):
    """A batch's schema cannot be written to the table (type change, missing key column)."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        column: str | None = None,
        types: tuple[str, str] | None = None,
        partitioning: tuple[list[str], list[str]] | None = None,
    ):
        super().__init__(message, path=path)
        self.column = column
        self.types = types
        """For a column whose type changed: its type in the table and in the batch."""
        self.partitioning = partitioning
        """For a sink whose `partition_by` changed: the table's partition columns and the
        sink's."""


class DeltaWriteError(DeltaStreamError):
    """Writing or committing a batch failed; `batch_id` names the batch."""

    def __init__(self, message: str, *, path: str | None = None, batch_id: int | None = None):
        super().__init__(message, path=path)
        self.batch_id = batch_id


class DeltaTableNotFoundError(DeltaStreamError):
    """The table a reader or maintenance call needs does not exist yet."""


class DeltaReadError(DeltaStreamError):
    """A stream read over the table's versions cannot continue (vacuumed files, rewrites)."""

    def __init__(self, message: str, *, path: str | None = None, version: int | None = None):
        super().__init__(message, path=path)
        self.version = version


class NativeEngineUnavailableError(DeltaStreamError):
    """`engine="native"` was asked for but the JVM has no delta-spark classes."""
