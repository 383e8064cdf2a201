"""The root of every error the framework raises on purpose.

Each subpackage defines its own errors in its `errors.py`, deriving from
`WarehouseError`; they carry structured attributes (`table`, `path`, `field`)
so that the CLI can print them without a traceback.
"""

from __future__ import annotations


class WarehouseError(Exception):
    """Base class of the framework's errors. `exit_code` is what the CLI exits with."""

    exit_code: int = 1

    def __init__(self, message: str, *, table: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.table = table

    def __str__(self) -> str:
        return self.message
