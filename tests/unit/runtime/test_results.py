"""The line a run prints per table."""

from __future__ import annotations

from dataclasses import replace

from warehouse.runtime.results import RunResult


def test_a_run_that_committed_no_version_says_so_and_not_a_dash() -> None:
    """A table already up to date (or not built) commits nothing: "version -" read as
    "no table"; the line says no new version was made."""
    idle = RunResult("ods_events", "ods", seconds=2.04)
    assert idle.line() == (
        "ods_events [ods]: 0 batch(es), 0 rows in, 0 written, 0 quarantined, no new version, 2.0s"
    )
    wrote = replace(idle, batches=1, rows_read=6, rows_written=5, quarantined=1, version=3)
    assert wrote.line() == (
        "ods_events [ods]: 1 batch(es), 6 rows in, 5 written, 1 quarantined, version 3, 2.0s"
    )
