"""A continuous run lets `spark.concurrent_batches` batches write at once.

Real Spark, a real broker, real Delta, the Python engines (the gate is the runner's,
the same on either engine): with one slot, the landing table and the table it feeds
never write at once, every order still arrives, and the stop leaves nothing waiting.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from deltalake.exceptions import TableNotFoundError

from streams.kafka.admin import ensure_topic, produce
from tests.integration.runtime.helpers import order, rows
from tests.unit.runtime.projects import write_project
from warehouse import Project
from warehouse.runtime.pipeline import Pipeline

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_one_slot_serializes_the_batches_and_loses_nothing(
    spark, broker, unique, tmp_path: Path
) -> None:
    topic = unique("orders")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    proj = write_project(
        tmp_path / "proj",
        topic=topic,
        bootstrap=broker.bootstrap,
        engine="python",
        extra_conf="  concurrent_batches: 1\n",
    )
    project = Project.load(proj, environ={})
    assert project.config.spark.concurrent_batches == 1
    pipeline = Pipeline(project, spark, layer="all", bootstrap=broker.bootstrap)
    runner = threading.Thread(target=pipeline.run, kwargs={"once": False}, daemon=True)
    runner.start()
    want = []
    try:
        deadline = time.monotonic() + 240
        for wave in range(4):  # orders keep coming while both queries run
            batch = [f"w{wave}_{i}" for i in range(5)]
            produce(broker.bootstrap, topic, [(o, order(o, "u1", 1.0, wave)) for o in batch])
            want += batch
            time.sleep(3)
        got: list[tuple] = []
        while time.monotonic() < deadline and runner.is_alive():
            try:
                got = rows(project.table_path("dwd_orders"), ["order_id"])
            except TableNotFoundError:
                pass
            if len(got) >= len(want):
                break
            time.sleep(1)
    finally:
        pipeline.request_stop()
        runner.join(timeout=180)
    assert not runner.is_alive()

    assert sorted(o for (o,) in got) == sorted(want)
    gate = pipeline.gate
    assert gate is not None and gate.slots == 1
    assert gate.peak == 1  # both tables' batches went through it, one at a time
    assert gate._busy == 0 and not gate._queue  # the stop left nobody inside or waiting


def test_auto_is_the_cores_of_a_local_master_and_zero_is_no_gate(
    spark, broker, unique, tmp_path: Path
) -> None:
    proj = write_project(tmp_path / "proj", topic=unique("orders"), bootstrap=broker.bootstrap)
    auto = Pipeline(Project.load(proj, environ={}), spark, bootstrap=broker.bootstrap)
    gate = auto._batch_gate()
    assert gate is not None
    assert spark.conf.get("spark.master") == "local[2]"  # tests/conftest.py
    assert gate.slots == 2
    off = Project.load(proj, environ={}, spark__concurrent_batches=0)
    assert Pipeline(off, spark, bootstrap=broker.bootstrap)._batch_gate() is None
