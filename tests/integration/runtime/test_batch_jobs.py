"""A small batch of a native upsert from a table runs no count job of its own.

A table-sourced upsert on the native engine takes the persisted path (delta-spark's
MERGE reads its source more than once): the batch is persisted, and a small one is
collected to the driver and merged there (decision 0011). The batch's rows are counted
where the persisted plan runs, in the job that collects it, not by a count job of its
own (decision 0059). Real broker, real Spark, real Delta: a continuous run, one order a
round; a query's Spark jobs are those of its job group (its run id), counted by Spark's
own status tracker between rounds.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from streams.kafka.admin import ensure_topic, produce
from tests.integration.runtime.helpers import order, rows
from tests.unit.runtime.projects import write_project
from warehouse import Project
from warehouse.runtime.pipeline import Pipeline

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

ROUNDS = 4


def test_a_small_native_upsert_from_a_table_counts_no_job_of_its_own(
    spark, broker, unique, tmp_path: Path, native_jars
) -> None:
    topic = unique("batch-jobs")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    root = write_project(
        tmp_path / "proj", topic=topic, bootstrap=broker.bootstrap, engine="native"
    )
    dwd = root / "layers" / "dwd"
    (dwd / "orders.yml").unlink()
    (dwd / "latest.yml").write_text(
        "table: dwd_latest\nsource: {table: ods_orders}\n"
        "sink: {mode: upsert, keys: [order_id], sequence_by: event_time}\n"
    )
    project = Project.load(root)
    produce(broker.bootstrap, topic, [("k0", order("o0", "u1", 0.0, 0))])
    for name in ("ods_orders", "dwd_latest"):  # the table exists before the run
        Pipeline(project, spark, tables=[name]).run(once=True)
    pipeline = Pipeline(project, spark, layer="all")
    runner = threading.Thread(target=pipeline.run, kwargs={"once": False}, daemon=True)
    runner.start()
    tracker = spark.sparkContext.statusTracker()
    jobs: list[int] = []
    try:
        for n in range(1, ROUNDS + 1):
            produce(broker.bootstrap, topic, [(f"k{n}", order(f"o{n}", "u1", float(n), n))])
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and runner.is_alive():
                if rows(project.table_path("dwd_latest"), ["order_id"])[-1:] == [(f"o{n}",)]:
                    break
                time.sleep(0.2)
            (query,) = [q for q in spark.streams.active if q.name.endswith("dwd_latest")]
            jobs.append(len(tracker.getJobIdsForGroup(str(query.runId))))
    finally:
        pipeline.request_stop()
        runner.join(timeout=180)
    assert not runner.is_alive()

    assert rows(project.table_path("dwd_latest"), ["order_id", "amount"]) == [
        (f"o{n}", float(n)) for n in range(ROUNDS + 1)
    ]
    # Four Spark jobs a batch of one order. With a count job of its own before the write
    # it was six: a count of the persisted batch is two jobs under adaptive execution
    # (its aggregate's shuffle, then its result).
    per_batch = [b - a for a, b in zip(jobs, jobs[1:], strict=False)]
    assert per_batch == [4] * (ROUNDS - 1), jobs
