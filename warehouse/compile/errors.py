"""Errors of compiling a table into its program."""

from __future__ import annotations

from warehouse.errors import WarehouseError


class CompileError(WarehouseError):
    """A table cannot be compiled into a query (the spec is valid but cannot run as given)."""

    exit_code = 2


class SelectionError(WarehouseError):
    """`--layer` / `--table` name nothing the project has."""

    exit_code = 2


class TransformError(WarehouseError):
    """A user transform (SQL or Python) failed; names the table and layer."""

    def __init__(self, message: str, *, table: str, layer: str) -> None:
        super().__init__(message, table=table)
        self.layer = layer


class CheckpointError(WarehouseError):
    """A table's checkpoint is not what its writer needs (no query id); `path` is the
    checkpoint folder."""

    def __init__(self, message: str, *, table: str, path: str) -> None:
        super().__init__(message, table=table)
        self.path = path
