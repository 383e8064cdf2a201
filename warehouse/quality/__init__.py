"""Data quality: expectation registry, in-stream row checks, `warehouse check`.

Importing this package does not import Spark or great-expectations: the loader
uses `warehouse.quality.registry` at project load. The Spark and GE parts are
loaded on first use of their names.
"""

from __future__ import annotations

from typing import Any

from warehouse.quality.errors import CheckSetupError, ExpectationFailed, QualityError
from warehouse.quality.registry import (
    EXPECTATION_TYPES,
    ROW_LEVEL,
    TABLE_LEVEL,
    expectation_id,
    is_row_level,
    validate,
)

_LAZY = {
    "RowChecks": "warehouse.quality.rows",
    "CheckedBatch": "warehouse.quality.rows",
    "compile_row_checks": "warehouse.quality.rows",
    "quarantine_from_parse_errors": "warehouse.quality.rows",
    "QUARANTINE_SCHEMA": "warehouse.quality.rows",
    "quality_events_frame": "warehouse.quality.events",
    "write_quality_events": "warehouse.quality.events",
    "quality_summary": "warehouse.quality.events",
    "run_checks": "warehouse.quality.check",
    "CheckReport": "warehouse.quality.check",
}

__all__ = [
    "EXPECTATION_TYPES",
    "QUARANTINE_SCHEMA",
    "ROW_LEVEL",
    "TABLE_LEVEL",
    "CheckReport",
    "CheckSetupError",
    "CheckedBatch",
    "ExpectationFailed",
    "QualityError",
    "RowChecks",
    "compile_row_checks",
    "expectation_id",
    "is_row_level",
    "quality_events_frame",
    "quality_summary",
    "quarantine_from_parse_errors",
    "run_checks",
    "validate",
    "write_quality_events",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
