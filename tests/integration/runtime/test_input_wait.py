"""A continuous query waits in its source for new input (its upstream table's next
commit, its topics' next record) where its engine's source can (the python engine, a
local table; docs/decisions/0072), and Spark polls it as before everywhere else. A stop
ends the wait through the query's wake file (docs/decisions/0079).

Real broker, real Spark and Delta. The compile decides which queries wait; a running
query shows it in its status: an idle query whose source waits is inside a trigger
most of the time, one that Spark polls is between triggers (`Waiting for data to
arrive`) most of the time. Either way, what comes in reaches the tables once, and a stop
ends the run.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from deltalake.exceptions import TableNotFoundError

from streams.kafka.admin import produce
from tests.integration.projects import new_layer
from tests.integration.runtime.helpers import order, orders_project, rows
from warehouse import Project
from warehouse.compile import program as program_module
from warehouse.compile.engines import ResolvedEngines
from warehouse.compile.program import build_program
from warehouse.runtime import writer as writer_module
from warehouse.runtime.pipeline import Pipeline
from warehouse.runtime.query import POLLING_DELAY, WAITING_POLLING_DELAY, query_settings

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

APPENDED_WINDOWS = """\
table: dws_windows
source: {table: dwd_orders}
watermark: {column: event_time, delay: 1 second}
aggregate:
  window: {column: event_time, size: 1 minute}
  group_by: [user_id]
  measures: {orders: count(*)}
sink: {mode: append}
"""

UPSERTED_WINDOWS = APPENDED_WINDOWS.replace("dws_windows", "dws_live").replace(
    "{mode: append}", "{mode: upsert, keys: [window_start, user_id]}"
)

PACED = """\
table: dwd_paced
source: {table: ods_orders}
trigger: {interval: 5 seconds}
sink: {mode: append}
"""

JOINED = """\
table: dwd_joined
source:
  table: dwd_orders
  join_streams:
    - table: ods_orders
      watermark: {column: event_time, delay: 1 second}
watermark: {column: event_time, delay: 1 second}
transform:
  sql: |
    SELECT o.order_id, p.order_id AS landed
    FROM source o JOIN ods_orders p
      ON p.order_id = o.order_id
     AND p.event_time >= o.event_time
     AND p.event_time <= o.event_time + INTERVAL 1 MINUTE
sink: {mode: append}
"""


MATCHED = """\
table: dwd_matched
source:
  table: ods_orders
  join_streams:
    - table: dwd_orders
      watermark: {column: event_time, delay: 1 second}
watermark: {column: event_time, delay: 1 second}
transform:
  sql: |
    SELECT o.order_id, d.order_id AS cleaned
    FROM source o JOIN dwd_orders d
      ON d.order_id = o.order_id
     AND d.event_time >= o.event_time
     AND d.event_time <= o.event_time + INTERVAL 1 MINUTE
sink: {mode: append}
"""

UNMATCHED = MATCHED.replace("dwd_matched", "dwd_unmatched").replace(
    "FROM source o JOIN", "FROM source o LEFT OUTER JOIN"
)


def test_the_compile_decides_which_queries_wait_for_their_upstream(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    topic, proj = orders_project(tmp_path / "proj", broker.bootstrap, unique, engine=engine)
    (proj / "layers" / "dwd" / "paced.yml").write_text(PACED)
    (proj / "layers" / "dwd" / "joined.yml").write_text(JOINED)
    (proj / "layers" / "dwd" / "unmatched.yml").write_text(UNMATCHED)
    dws = new_layer(proj, "dws")
    (dws / "windows.yml").write_text(APPENDED_WINDOWS)
    (dws / "live.yml").write_text(UPSERTED_WINDOWS)
    project = Project.load(proj, environ={})
    produce(broker.bootstrap, topic, [("o1", order("o1", "u1", 1.0, 0))])
    Pipeline(project, spark, tables=["ods_orders", "dwd_orders"], bootstrap=broker.bootstrap).run(
        once=True
    )

    def waits(table: str, *, once: bool = False) -> tuple[bool, bool]:
        program = build_program(
            project,
            table,
            spark,
            engines=ResolvedEngines.named(engine, engine),
            once=once,
            bootstrap=broker.bootstrap,
        )
        try:
            short = query_settings(program).get(POLLING_DELAY) == WAITING_POLLING_DELAY
            wake = program.wake_file
            # A waiting source has a wake file to be stopped by, in a folder it can watch.
            assert (wake is not None) == program.waits_for_input
            assert wake is None or (Path(wake).parent.is_dir() and not Path(wake).exists())
            return program.waits_for_input, short
        finally:
            for view in program.views:
                spark.catalog.dropTempView(view)

    # Spark's own sources (native) cannot wait: Spark polls them.
    assert waits("ods_orders") == (engine == "python",) * 2
    assert waits("dwd_orders") == (engine == "python",) * 2
    assert waits("dws_live") == (engine == "python",) * 2  # upserted windows: emit with input
    assert waits("dwd_orders", once=True) == (False, False)
    assert waits("ods_orders", once=True) == (False, False)
    assert waits("dwd_paced") == (False, False)  # its own cadence
    # A join of streams waits in its own table's source for a commit of either table;
    # an outer join emits its unmatched rows in batches of no data, which a wait holds.
    assert waits("dwd_joined") == (engine == "python",) * 2
    assert waits("dwd_unmatched") == (False, False)
    assert waits("dws_windows") == (False, False)  # closes windows in batches of no data


def _trigger_share(query, *, samples: int = 40, every: float = 0.05) -> float:
    """The share of `samples` looks at `query`'s status that found it inside a trigger."""
    inside = 0
    for _ in range(samples):
        inside += bool(query.status["isTriggerActive"])
        time.sleep(every)
    return inside / samples


def test_idle_queries_wait_for_input_and_take_it_once(
    spark, broker, unique, tmp_path: Path, engine: str, monkeypatch
) -> None:
    # Waits, and a stop's patience with a trigger before it interrupts it, longer than the
    # stop is given below: the stop must end the waits (their wake files).
    monkeypatch.setattr(program_module, "INPUT_WAIT", 600.0)
    monkeypatch.setattr(writer_module, "_PLANNING_WAIT", 600.0)
    topic, proj = orders_project(tmp_path / "proj", broker.bootstrap, unique, engine=engine)
    project = Project.load(proj, environ={})
    produce(broker.bootstrap, topic, [("o1", order("o1", "u1", 1.0, 0))])
    pipeline = Pipeline(project, spark, layer="all", bootstrap=broker.bootstrap)
    runner = threading.Thread(target=pipeline.run, kwargs={"once": False}, daemon=True)
    runner.start()
    dwd = project.table_path("dwd_orders")
    try:
        _wait_rows(dwd, 1, runner)
        inside = {
            name: _trigger_share(_query(spark, name)) for name in ("ods_orders", "dwd_orders")
        }
        produce(broker.bootstrap, topic, [("o2", order("o2", "u1", 2.0, 1))])
        _wait_rows(dwd, 2, runner)
    finally:
        pipeline.request_stop()
        runner.join(timeout=180)
    assert not runner.is_alive()  # the waits ended at the stop
    assert rows(dwd, ["order_id"]) == [("o1",), ("o2",)]
    assert rows(project.table_path("ods_orders"), ["order_id"]) == [("o1",), ("o2",)]
    for name, share in inside.items():
        if engine == "python":
            assert share > 0.5, (name, share)  # in its source's wait for input
        else:
            assert share < 0.5, (name, share)  # between Spark's polls


def _query(spark, table: str):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for q in spark.streams.active:
            if q.name == f"warehouse_{table}":
                return q
        time.sleep(0.2)
    raise AssertionError(f"no running query of `{table}`")


def _wait_rows(path: Path, n: int, runner: threading.Thread) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and runner.is_alive():
        try:
            if len(rows(path, ["order_id"])) >= n:
                return
        except TableNotFoundError:  # its first commit is not there yet
            pass
        time.sleep(0.5)
    raise AssertionError(f"{path}: {n} rows did not arrive (runner alive: {runner.is_alive()})")


def test_a_joined_query_waits_for_either_table(
    spark, broker, unique, tmp_path: Path, engine: str, monkeypatch
) -> None:
    """`dwd_matched` reads `ods_orders` and joins `dwd_orders`, which commits each order
    after `ods_orders` does: with waits of 600 s the order's match comes only if the
    wait in `ods_orders`' source ends at `dwd_orders`' commit (its `watch_also`)."""
    monkeypatch.setattr(program_module, "INPUT_WAIT", 600.0)
    monkeypatch.setattr(writer_module, "_PLANNING_WAIT", 600.0)
    topic, proj = orders_project(tmp_path / "proj", broker.bootstrap, unique, engine=engine)
    (proj / "layers" / "dwd" / "matched.yml").write_text(MATCHED)
    project = Project.load(proj, environ={})
    produce(broker.bootstrap, topic, [("o1", order("o1", "u1", 1.0, 0))])
    pipeline = Pipeline(project, spark, layer="all", bootstrap=broker.bootstrap)
    runner = threading.Thread(target=pipeline.run, kwargs={"once": False}, daemon=True)
    runner.start()
    matched = project.table_path("dwd_matched")
    try:
        _wait_rows(matched, 1, runner)
        share = _trigger_share(_query(spark, "dwd_matched"))  # idle: in its wait, or not
        produce(broker.bootstrap, topic, [("o2", order("o2", "u1", 2.0, 1))])
        _wait_rows(matched, 2, runner)
    finally:
        pipeline.request_stop()
        runner.join(timeout=180)
    assert not runner.is_alive()  # the waits ended at the stop
    assert rows(matched, ["order_id", "cleaned"]) == [("o1", "o1"), ("o2", "o2")]
    if engine == "python":
        assert share > 0.5, share
    else:
        assert share < 0.5, share
