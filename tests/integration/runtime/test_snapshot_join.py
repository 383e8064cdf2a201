"""A stream-static join reads the table's version of each micro-batch, not the one the
query started with: a continuous run on both engines, real broker, real Delta. Orders
are joined with a `dim_users` snapshot; while the query runs, the dimension gains a user
and moves another one, and the orders after that must see both. With `snapshots:
{max_age: ...}` they see the copy kept in Spark's cache until it is older than that."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from deltalake.exceptions import TableNotFoundError

from streams.kafka.admin import ensure_topic, produce
from tests.integration.runtime.helpers import order, rows, version
from tests.unit.runtime.projects import write_dws_project
from warehouse import Project
from warehouse.runtime.pipeline import Pipeline
from warehouse.runtime.snapshots import KeptSnapshot, SnapshotCache, kept_snapshot, read_snapshot

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

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


def run_with_a_change(
    spark, broker, unique, tmp_path: Path, engine: str, table: str
) -> tuple[list[tuple], list[tuple]]:
    """The orders joined before and after the dimension changed outside the run (delta-rs,
    not this session's Spark), in a continuous run of `table`."""
    topic = unique("orders")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    proj = write_dws_project(
        tmp_path / "proj", topic=topic, bootstrap=broker.bootstrap, engine=engine
    )
    (proj / "layers" / "dwd" / "order_city.yml").write_text(table)
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
    return first, after


def test_a_snapshot_join_sees_the_dimension_of_each_batch(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    first, after = run_with_a_change(spark, broker, unique, tmp_path, engine, JOINED)
    assert first == [("o1", "Paris")]
    assert after == [("o1", "Paris"), ("o2", "Oslo"), ("o3", "Rome")]


def test_a_kept_snapshot_is_joined_while_younger_than_its_max_age(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    kept = JOINED + "snapshots: {max_age: 1 hour}\n"
    first, after = run_with_a_change(spark, broker, unique, tmp_path, engine, kept)
    assert first == [("o1", "Paris")]
    # The copy read when the query started: no `u2`, `u1` still in Paris.
    assert after == [("o1", "Paris"), ("o2", None), ("o3", "Paris")]


def kept_dimension(
    spark, tmp_path: Path, engine: str, max_age: float
) -> tuple[Path, DataFrame, list[float], SnapshotCache]:
    """A `dim_users` table of one user, its snapshot kept, and the clock the keeper reads
    (a one-item list to move)."""
    dim = tmp_path / "dim_users"
    dimension(dim, {"u1": "Paris"}, mode="error")
    frame = read_snapshot(spark, str(dim), engine=engine)
    now = [100.0]
    kept = SnapshotCache(
        "t", {"dim_users": KeptSnapshot(str(dim), frame)}, max_age, clock=lambda: now[0]
    )
    return dim, frame, now, kept


def test_a_kept_snapshot_is_read_again_once_older_than_its_max_age(
    spark, tmp_path: Path, engine: str
) -> None:
    dim, frame, now, kept = kept_dimension(spark, tmp_path, engine, 10.0)
    view = "kept_dim_users"
    frame.createOrReplaceTempView(view)

    def cities() -> list[tuple]:
        return sorted(tuple(r) for r in spark.sql(f"SELECT user_id, city FROM {view}").collect())

    try:
        assert cities() == [("u1", "Paris")]
        now[0] += 10.0
        assert kept.refresh() == []  # due, but the table has no newer version
        dimension(dim, {"u1": "Rome", "u2": "Oslo"}, mode="overwrite")
        now[0] += 9.9
        assert kept.refresh() == []
        assert cities() == [("u1", "Paris")]
        now[0] += 0.1
        assert kept.refresh() == ["dim_users"]
        assert cities() == [("u1", "Rome"), ("u2", "Oslo")]
        dimension(dim, {"u3": "Kyiv"}, mode="append")
        assert cities() == [("u1", "Rome"), ("u2", "Oslo")]
    finally:
        kept.release()
    assert not frame.is_cached
    # Released: each read is of the newest version again.
    assert cities() == [("u1", "Rome"), ("u2", "Oslo"), ("u3", "Kyiv")]
    spark.catalog.dropTempView(view)


def test_a_kept_snapshot_that_cannot_be_read_again_fails_the_reads_not_the_runner(
    spark, tmp_path: Path, engine: str
) -> None:
    dim, frame, now, kept = kept_dimension(spark, tmp_path, engine, 1.0)
    try:
        assert frame.count() == 1
        shutil.rmtree(dim)
        now[0] += 1.0
        # Native reads the table when the copy is made (it fails and is logged), Python
        # when a plan first runs: either way the runner's loop goes on, and no read
        # gives the old copy of a table that is gone.
        kept.refresh()
        with pytest.raises(Exception):  # noqa: B017 - each engine words it its own way
            frame.collect()
    finally:
        kept.release()


def test_tables_keeping_the_same_snapshot_share_one_copy_until_the_last_lets_go(
    spark, tmp_path: Path, engine: str
) -> None:
    dim = tmp_path / "dim_users"
    dimension(dim, {"u1": "Paris"}, mode="error")
    shared = kept_snapshot(spark, str(dim), engine=engine)
    assert kept_snapshot(spark, str(dim), engine=engine) is shared
    now = [0.0]
    first = SnapshotCache("a", {"dim_users": shared}, 10.0, clock=lambda: now[0])
    second = SnapshotCache("b", {"dim_users": shared}, 60.0, clock=lambda: now[0])
    view = "shared_dim_users"
    shared.frame.createOrReplaceTempView(view)

    def cities() -> list[tuple]:
        return sorted(tuple(r) for r in spark.sql(f"SELECT user_id, city FROM {view}").collect())

    try:
        assert cities() == [("u1", "Paris")]
        dimension(dim, {"u1": "Rome"}, mode="overwrite")
        now[0] += 10.0
        assert first.refresh() == ["dim_users"]
        assert cities() == [("u1", "Rome")]
        now[0] += 50.0
        assert second.refresh() == []  # the shared copy is the newest version already
        dimension(dim, {"u1": "Oslo"}, mode="overwrite")
        first.release()
        # The other table still keeps it: its copy stays.
        assert shared.frame.is_cached
        assert cities() == [("u1", "Rome")]
    finally:
        second.release()
    assert not shared.frame.is_cached
    assert cities() == [("u1", "Oslo")]
    assert kept_snapshot(spark, str(dim), engine=engine) is not shared
    spark.catalog.dropTempView(view)
