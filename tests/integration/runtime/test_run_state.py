"""A run's tables say what they do: `<root>/runs/<table>.json`, written by the process
running them; and `status` says how many versions of its input a table read from a table
has yet to read, from either engine's checkpoint (real broker, real Spark, real Delta)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from deltalake import DeltaTable, write_deltalake

from streams.kafka.admin import produce
from tests.integration.runtime.helpers import order, orders_project
from warehouse import Project
from warehouse.runtime.pipeline import Pipeline
from warehouse.runtime.run_state import read_states
from warehouse.runtime.status import status

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_a_once_run_records_each_table_batch_by_batch_then_stopped(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    topic, proj = orders_project(tmp_path / "proj", broker.bootstrap, unique, engine=engine)
    project = Project.load(proj, environ={})
    assert {n: s["state"] for n, s in read_states(project, project.tables).items()} == {
        "ods_orders": "never run",
        "dwd_orders": "never run",
    }
    produce(
        broker.bootstrap,
        topic,
        [("a", order("o1", "u1", 1.0, 0)), ("b", order("o2", "u2", 2.0, 1)), ("x", "{bad")],
    )

    Pipeline(project, spark, layer="all", bootstrap=broker.bootstrap).run(once=True)

    states = read_states(project, project.tables)
    ods, dwd = states["ods_orders"], states["dwd_orders"]
    assert (ods["state"], dwd["state"]) == ("stopped", "stopped")
    record = ods["record"]
    assert (record["pid"], record["mode"], record["error"]) == (os.getpid(), "once", None)
    assert [(b["batch_id"], b["rows_in"], b["rows_written"], b["quarantined"]) for b in
            record["batches"]] == [(0, 3, 2, 1)]  # fmt: skip
    assert sum(b["rows_written"] for b in dwd["record"]["batches"]) == 2
    assert record["ended_at"] >= record["started_at"]
    behind = {r["table"]: r.get("versions_behind") for r in status(project, resolve=False)}
    assert behind == {"ods_orders": None, "dwd_orders": {"total": 0, "tables": {"ods_orders": 0}}}

    # A version more in the landing table (an empty commit will do): its reader is one
    # version behind it.
    ods_path = project.table_path("ods_orders")
    write_deltalake(ods_path, DeltaTable(ods_path).to_pyarrow_table().slice(0, 0), mode="append")
    dwd_row = next(r for r in status(project, resolve=False) if r["table"] == "dwd_orders")
    assert dwd_row["versions_behind"] == {"total": 1, "tables": {"ods_orders": 1}}
