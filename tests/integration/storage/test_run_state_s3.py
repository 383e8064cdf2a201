"""A run's state records on object storage: written and read through `streams.storage`
on the S3-API server, as on a local disk (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

import streams.storage as storage
from tests.unit.runtime.projects import write_project
from warehouse import Project
from warehouse.runtime.run_state import RunStates, read_states
from warehouse.runtime.writer import BatchStats

pytestmark = [pytest.mark.s3]


def test_state_records_live_under_an_s3_root(s3_root: str, tmp_path: Path) -> None:
    proj = write_project(tmp_path / "p", bootstrap="127.0.0.1:1", warehouse_root=s3_root)  # type: ignore[arg-type]
    project = Project.load(proj)
    assert project.root == s3_root
    states = RunStates(project, mode="continuous")
    states.started("ods_orders")
    states.batch("ods_orders", 0, BatchStats(rows_in=4, rows_written=3, quarantined=1))
    got = read_states(project, ["ods_orders", "dwd_orders"])
    assert got["ods_orders"]["state"] == "running"
    assert got["ods_orders"]["record"]["batches"][0]["rows_written"] == 3
    assert got["dwd_orders"]["state"] == "never run"
    states.stop_all()
    assert read_states(project, ["ods_orders"])["ods_orders"]["state"] == "stopped"
    assert storage.is_file(f"{s3_root}/runs/ods_orders.json")
