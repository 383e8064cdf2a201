"""Errors of `warehouse bundle`."""

from __future__ import annotations

from pathlib import Path

from warehouse.errors import WarehouseError


class BundleError(WarehouseError):
    """The environment archive could not be built; `.path` is the file or folder at fault."""

    exit_code = 1

    def __init__(self, message: str, *, path: Path | str | None = None) -> None:
        super().__init__(message)
        self.path = Path(path) if path is not None else None


class BundleArgumentError(BundleError):
    """The bundle was asked for with arguments that cannot work (exit 2)."""

    exit_code = 2
