"""Errors raised while building or running queries."""

from __future__ import annotations

from warehouse.errors import WarehouseError


class RuntimeConfigError(WarehouseError):
    """The environment cannot run what the configuration asks for (engine, broker, session)."""

    exit_code = 2


class QueryFailedError(WarehouseError):
    """A streaming query stopped with an exception."""


class RecoverError(WarehouseError):
    """`warehouse recover` / `reset` could not do what was asked."""


class JarsError(WarehouseError):
    """The native engines' jars could not be resolved (no network, a version not served)."""
