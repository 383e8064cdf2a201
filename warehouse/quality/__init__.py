"""Data quality: in-stream row checks, per-batch quality events, `warehouse check`.

The expectation registry (types, arguments, where each runs) is part of the spec
(`warehouse.spec.expectations`): a project validates its expectations when it
loads. Importing this package imports neither Spark nor great-expectations: the
in-stream row checks, which are Spark expressions, live in `warehouse.quality.rows`
and are not re-exported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from warehouse.exports import lazy_exports

if TYPE_CHECKING:
    from warehouse.quality.check import run_checks
    from warehouse.quality.errors import CheckSetupError, ExpectationFailed, QualityError
    from warehouse.quality.events import (
        quality_events_frame,
        quality_summary,
        write_quality_events,
    )
    from warehouse.quality.report import CheckReport
    from warehouse.quality.summary import quality_summaries, recent_quarantine

_EXPORTS = {
    "CheckReport": "warehouse.quality.report",
    "CheckSetupError": "warehouse.quality.errors",
    "ExpectationFailed": "warehouse.quality.errors",
    "QualityError": "warehouse.quality.errors",
    "quality_events_frame": "warehouse.quality.events",
    "quality_summaries": "warehouse.quality.summary",
    "quality_summary": "warehouse.quality.events",
    "recent_quarantine": "warehouse.quality.summary",
    "run_checks": "warehouse.quality.check",
    "write_quality_events": "warehouse.quality.events",
}
"""Each public name and the module it comes from, imported on first use: Spark's Python
workers import this package for `arrow_rows` and `arrow_quarantine` alone."""

__all__ = [
    "CheckReport",
    "CheckSetupError",
    "ExpectationFailed",
    "QualityError",
    "quality_events_frame",
    "quality_summaries",
    "quality_summary",
    "recent_quarantine",
    "run_checks",
    "write_quality_events",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
