"""What the pipeline page shows, as data (`warehouse.ui.PipelineView`) and as its
banner: no Spark, no browser."""

from __future__ import annotations

from pathlib import Path

from tests.unit.runtime.projects import write_project
from warehouse import Project
from warehouse.runtime.run_state import RunStates
from warehouse.runtime.writer import BatchStats
from warehouse.ui import PipelineView
from warehouse.ui.app import banner, elements


def test_a_project_never_run_then_running_then_failed(tmp_path: Path) -> None:
    project = Project.load(write_project(tmp_path / "p", bootstrap="127.0.0.1:1"), environ={})
    view = PipelineView(project)
    graph = view.graph()
    assert [(n["table"], n["layer"], n["x"]) for n in graph["nodes"]] == [
        ("ods_orders", "ods", 0),
        ("dwd_orders", "dwd", 260),
    ]
    assert graph["edges"] == [
        {"upstream": "ods_orders", "downstream": "dwd_orders", "kind": "source"}
    ]
    snap = view.snapshot()
    assert {n: r["state"] for n, r in snap["tables"].items()} == {
        "ods_orders": "never run",
        "dwd_orders": "never run",
    }
    assert banner(snap["run"]) == ("Never run: no process has run these tables yet.", "never-run")
    labels = {e["data"].get("id"): e["data"].get("label") for e in elements(view, snap)}
    assert labels["layer:ods"] == "ODS" and labels["ods_orders"] == "ods_orders\nnever run · - rows"
    assert snap["tables"]["ods_orders"]["quarantine_rows"] is None

    states = RunStates(project, mode="continuous")
    states.started("ods_orders")
    states.batch("ods_orders", 0, BatchStats(rows_in=3, rows_written=2, quarantined=1))
    snap = view.snapshot()
    ods = snap["tables"]["ods_orders"]
    assert ods["state"] == "running"
    assert (ods["last_batch"]["rows_in"], ods["last_batch"]["rows_written"]) == (3, 2)
    line, kind = banner(snap["run"])
    assert kind == "running" and line.startswith("Running: pid ")

    states.failed("ods_orders", "column `x` not found")
    snap = view.snapshot()
    assert (snap["tables"]["ods_orders"]["state"], snap["tables"]["ods_orders"]["reason"]) == (
        "failed",
        "column `x` not found",
    )
    line, kind = banner(snap["run"])
    assert kind == "failed" and line.startswith("Run failed: no process runs these tables now")
    details = view.details("ods_orders")
    assert details["definition"][0]["file"] == "layers/ods/orders.yml"
    assert "table: ods_orders" in details["definition"][0]["text"]
    assert details["quarantine"] == {"rows": 0, "reasons": []}
