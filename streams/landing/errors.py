"""Errors of `streams.landing`.

`streams` never imports `warehouse`, so these do not derive from `WarehouseError`;
the framework's CLI knows this root and prints it without a traceback. Each carries
the Delta `table` (the target's name) and `path` it is about.
"""

from __future__ import annotations


class LandingError(Exception):
    """Root of every error raised by `streams.landing`: `table` and `path` name the target."""

    def __init__(self, message: str, *, table: str | None = None, path: str | None = None):
        super().__init__(message)
        self.message = message
        self.table = table
        self.path = path

    def __str__(self) -> str:
        return self.message


class LandingConfigError(LandingError):
    """`kafka_json_append` was called for a target or payload this path does not take;
    `field` names the payload field (or the target option) at fault."""

    def __init__(
        self,
        message: str,
        *,
        table: str | None = None,
        path: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message, table=table, path=path)
        self.field = field
