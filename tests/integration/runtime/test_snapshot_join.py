"""A stream-static join reads the table's version of each micro-batch, not the one the
query started with: a continuous run on both engines, real broker, real Delta. Orders
are joined with a `dim_users` snapshot; while the query runs, the dimension gains a user
and moves another one, and the orders after that must see both."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from deltalake.exceptions import TableNotFoundError

from streams.kafka.admin import ensure_topic, produce
from tests.integration.runtime.helpers import order, rows, version
from tests.unit.runtime.projects import write_dws_project
from warehouse import Project
from warehouse.runtime.pipeline import Pipeline

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

JOINED = """\
table: dwd_order_city
source: {table: ods_orders}
transform:
  sql: |
    SELECT o.order_id, u.city
    FROM source o LEFT JOIN dim_users u ON o.user_id = u.user_id
sink: {mode: append}
"""


def dimension(path: Path, cities: dict[str, str], *, mode: str) -> None:
    write_deltalake(
        str(path),
        pa.table({"user_id": list(cities), "city": list(cities.values())}),
        mode=mode,
        configuration={"delta.enableChangeDataFeed": "true"},
    )


def wait_for(path: Path, count: int, runner: threading.Thread) -> list[tuple]:
    deadline = time.monotonic() + 180
    seen: list[tuple] = []
    while time.monotonic() < deadline and runner.is_alive():
        try:
            seen = rows(path, ["order_id", "city"])
        except TableNotFoundError:  # not created yet
            pass
        if len(seen) >= count:
            return seen
        time.sleep(0.5)
    return seen


def test_a_snapshot_join_sees_the_dimension_of_each_batch(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    topic = unique("orders")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    proj = write_dws_project(
        tmp_path / "proj", topic=topic, bootstrap=broker.bootstrap, engine=engine
    )
    (proj / "layers" / "dwd" / "order_city.yml").write_text(JOINED)
    project = Project.load(proj, environ={})
    dim = project.table_path("dim_users")
    dimension(dim, {"u1": "Paris"}, mode="error")
    produce(broker.bootstrap, topic, [("o1", order("o1", "u1", 1.0, 0))])
    Pipeline(project, spark, tables=["ods_orders"], bootstrap=broker.bootstrap).run(once=True)

    out = project.table_path("dwd_order_city")
    pipeline = Pipeline(
        project, spark, tables=["ods_orders", "dwd_order_city"], bootstrap=broker.bootstrap
    )
    runner = threading.Thread(target=pipeline.run, kwargs={"once": False}, daemon=True)
    runner.start()
    try:
        first = wait_for(out, 1, runner)
        before = version(dim)
        dimension(dim, {"u1": "Rome", "u2": "Oslo"}, mode="overwrite")
        assert version(dim) == (before or 0) + 1
        produce(
            broker.bootstrap,
            topic,
            [("o2", order("o2", "u2", 2.0, 1)), ("o3", order("o3", "u1", 3.0, 1))],
        )
        after = wait_for(out, 3, runner)
    finally:
        pipeline.request_stop()
        runner.join(timeout=180)
    assert not runner.is_alive()
    assert first == [("o1", "Paris")]
    assert after == [("o1", "Paris"), ("o2", "Oslo"), ("o3", "Rome")]
