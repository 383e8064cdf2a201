"""Errors of `warehouse ui`."""

from __future__ import annotations

from warehouse.errors import WarehouseError


class UiSetupError(WarehouseError):
    """The page cannot be served here: its extra is missing, or its port is taken."""

    exit_code = 2
