"""`warehouse status` shows each table's quality events (real Delta tables, no Spark)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from tests.unit.runtime.projects import write_project
from warehouse import Project
from warehouse.quality.events import write_quality_events
from warehouse.runtime.status import render_status, status


def _metrics(batch_id: int, failed: int) -> list[dict[str, object]]:
    return [
        {
            "table": "ods_orders",
            "batch_id": batch_id,
            "expectation": "expect_column_values_to_not_be_null(order_id)",
            "on_violation": "quarantine",
            "checked": 10,
            "passed": 10 - failed,
            "failed": failed,
        }
    ]


def test_status_reports_the_last_batch_and_totals_of_quality_events(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", bootstrap="127.0.0.1:1")
    project = Project.load(root)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    write_quality_events(None, project.root, _metrics(0, 2), app_id="a", batch_id=0, now=t0)
    later = t0.replace(minute=1)
    write_quality_events(None, project.root, _metrics(1, 1), app_id="a", batch_id=1, now=later)

    rows = {r["table"]: r for r in status(project, resolve=False)}
    quality = rows["ods_orders"]["quality"]
    assert quality["last_batch"]["batch_id"] == 1
    assert quality["totals"] == {
        "expect_column_values_to_not_be_null(order_id)": {
            "checked": 20,
            "passed": 17,
            "failed": 3,
            "batches": 2,
        }
    }
    assert (
        "ods_orders: quality expect_column_values_to_not_be_null(order_id) (quarantine): "
        "last batch 1 1 failed of 10; all batches 3 failed of 20"
    ) in render_status(list(rows.values())).splitlines()

    out = subprocess.run(
        [sys.executable, "-m", "warehouse", "--project", str(root), "status", "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    by_table = {r["table"]: r for r in json.loads(out)["tables"]}
    assert by_table["ods_orders"]["quality"]["totals"] == quality["totals"]


def test_a_table_not_built_yet_shows_no_figure(tmp_path: Path) -> None:
    """Before a first run every column of a table says `-`, its quarantine too (not 0)."""
    root = write_project(tmp_path / "p", bootstrap="127.0.0.1:1")
    lines = render_status(status(Project.load(root), resolve=False)).splitlines()
    assert lines[0].split() == [
        "table",
        "layer",
        "version",
        "rows",
        "last",
        "batch",
        "lag",
        "quarantine",
    ]
    assert lines[1].split() == ["ods_orders", "ods", "-", "-", "-", "-", "-"]
