"""A project whose `warehouse_root` is on S3 (`s3a://bucket/wh`, or `s3://`: a real
S3-API server), reached with the standard AWS variables alone, on both engines: `run
--layer all --once`, `status`, `check`, `recover` and `reset` with exactly the right rows,
and nothing of the tables on the local disk."""

from __future__ import annotations

import json
import threading
import time
from decimal import Decimal
from pathlib import Path

import pytest

import streams.storage as storage
from streams.kafka.admin import produce
from tests.integration.runtime.helpers import at, order, orders_project, rows
from warehouse.project import Project
from warehouse.quality.check import run_checks
from warehouse.runtime.errors import TableBusyError
from warehouse.runtime.pipeline import Pipeline
from warehouse.runtime.recover import recover, reset
from warehouse.runtime.status import status

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.s3]

DWD = ["order_id", "user_id", "amount", "event_time"]


def _run(project: Project, spark) -> dict[str, tuple[int, int, int]]:
    results = Pipeline(project, spark, layer="all", progress=lambda _: None).run(once=True)
    return {r.table: (r.rows_read, r.rows_written, r.quarantined) for r in results}


def test_a_project_on_s3_runs_checks_recovers_and_resets(
    spark, broker, unique, tmp_path: Path, s3_root: str, engine: str
) -> None:
    # `s3://` and `s3a://` mean the same: one of each, Spark's checkpoints included.
    if engine == "native":
        s3_root = s3_root.replace("s3a://", "s3://", 1)
    topic, proj = orders_project(
        tmp_path / "proj", broker.bootstrap, unique, partitions=2, engine=engine,
        warehouse_root=s3_root,
    )  # fmt: skip
    produce(
        broker.bootstrap,
        topic,
        [
            ("a", order("o1", "u1", 10.5, 0)),
            ("b", order("o2", "u2", 20.0, 1)),
            ("a", order("o1", "u1", 10.5, 0)),
            ("c", order(None, "u3", 1.0, 2)),
            ("x", "{not json"),
        ],
    )
    project = Project.load(proj)
    assert project.root == s3_root
    ods, dwd = project.table_path("ods_orders"), project.table_path("dwd_orders")
    assert ods == f"{s3_root}/tables/ods_orders"

    counts = _run(project, spark)
    assert counts["ods_orders"][0] == 5 and counts["ods_orders"][2] == 2
    assert rows(ods, ["order_id", "amount"]) == [("o1", 10.5), ("o1", 10.5), ("o2", 20.0)]
    assert rows(dwd, DWD) == [
        ("o1", "u1", Decimal("10.50"), at(0)),
        ("o2", "u2", Decimal("20.00"), at(1)),
    ]
    assert len(rows(project.quarantine_path("ods_orders"), ["reason"])) == 2

    st = {r["table"]: r for r in status(project, bootstrap=broker.bootstrap)}
    o = st["ods_orders"]
    assert (o["exists"], o["rows"], o["quarantine_rows"], o["checkpoint_exists"]) == (
        True, 3, 2, True,
    )  # fmt: skip
    assert sum(int(n) for n in o["committed_offsets"][topic].values()) == 5
    assert o["lag"]["total"] == 0
    assert o["quality"]["totals"]  # the quality events table on S3
    assert st["dwd_orders"]["rows"] == 2

    report = run_checks(project, table="ods_orders")
    assert report.location is not None and report.location.startswith(f"{s3_root}/reports/")
    published = json.loads(storage.read_text(f"{report.location}/results.json") or "{}")
    assert published["tables"]["ods_orders"]["rows"] == 3
    assert not report.report_dir.exists()  # written locally, published, removed
    run_checks(project, table="ods_orders", incremental=True)
    state = json.loads(storage.read_text(f"{s3_root}/quality/state.json") or "{}")
    assert state["tables"]["ods_orders"]["version"] == o["version"]
    again = run_checks(project, table="ods_orders", incremental=True)
    assert again.tables[0].status == "no_new_rows"

    # Recover rebuilds the checkpoint in place (copied: S3 renames nothing whole), and
    # the next run replays the newest batch through the guards: nothing twice.
    done = recover(project, "ods_orders")
    assert done["old_checkpoint_removed"] and (done["batch_id"], done["replays"]) == (0, True)
    ckpt = project.checkpoint_path("ods_orders")
    assert storage.list_names(f"{ckpt}/offsets") == ["0"]
    assert not storage.exists(f"{ckpt}.recovering")
    assert [n for n in storage.list_names(storage.parent(ckpt)) if ".recovering-" in n] == []
    produce(broker.bootstrap, topic, [("d", order("o3", "u1", 5.0, 3))])
    counts = _run(project, spark)
    assert counts["ods_orders"][:2] == (6, 1)  # batch 0 again (5 rows, none written), o3
    assert rows(ods, ["order_id"]) == [("o1",), ("o1",), ("o2",), ("o3",)]
    assert len(rows(project.quarantine_path("ods_orders"), ["reason"])) == 2

    removed = reset(project, "dwd_orders")
    assert dwd in removed and project.checkpoint_path("dwd_orders") in removed
    assert not storage.exists(dwd)
    _run(project, spark)
    assert [r[0] for r in rows(dwd, DWD)] == ["o1", "o2", "o3"]

    assert not (proj / ".warehouse").exists()  # nothing of the tables on the local disk


def test_a_run_whose_lease_is_taken_over_stops_and_fails(
    spark, broker, unique, tmp_path: Path, s3_root: str
) -> None:
    """A holder that stalled past its lease finds a newer generation at its next renewal
    (written here as the process that took the table over writes it): its continuous
    run stops its queries and fails, naming the table."""
    lease = 4.0
    topic, proj = orders_project(
        tmp_path / "proj", broker.bootstrap, unique, warehouse_root=s3_root,
        extra_conf=f"storage: {{lease_seconds: {lease}}}\n",
    )  # fmt: skip
    produce(broker.bootstrap, topic, [("a", order("o1", "u1", 10.5, 0))])
    project = Project.load(proj)
    pipeline = Pipeline(project, spark, layer="ods", progress=lambda _: None)
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            pipeline.run(once=False)
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001  # judged by the test below
            outcome.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    lock = f"{project.checkpoint_path('ods_orders')}.lock"
    deadline = time.monotonic() + 120
    while not storage.list_names(lock) or not storage.exists(project.table_path("ods_orders")):
        assert time.monotonic() < deadline and thread.is_alive(), outcome
        time.sleep(0.5)
    [mine] = storage.list_names(lock)
    taker = f"{lock}/{int(mine.removesuffix('.json')) + 1:012d}.json"
    storage.write_text(taker, json.dumps({"pid": 1, "host": "elsewhere", "doing": "run"}))
    thread.join(lease * 2 + 60)
    assert not thread.is_alive(), "the run went on after its lease was taken over"
    [error] = outcome
    assert isinstance(error, TableBusyError), error
    assert error.table == "ods_orders" and "Another process holds its tables" in str(error)
    assert not spark.streams.active
