"""Batches without new input run only for the queries where they can emit rows.

When the watermark moves, Spark runs another batch without input to evict state and
emit what the watermark closed. Only an append-mode aggregate (a closed window) or an
outer stream-stream join (the rows left unmatched) emits anything in it; for every other
query, an inner stream-stream join included, it is a whole extra micro-batch. Continuous
runs on both engines, real broker, real Delta: after the orders land, the dedupe table,
the upsert aggregate and the inner join must show no batch without input in their
offset logs, while the append-mode aggregate still closes its windows and the outer
join still emits its unmatched orders with no order after them.
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
from warehouse.runtime.pipeline import Pipeline

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

AGGREGATE = """\
source: {{table: dwd_orders}}
watermark: {{column: event_time, delay: 1 second}}
aggregate:
  window: {{column: event_time, size: 1 minute}}
  group_by: [user_id]
  measures: {{orders: count(*)}}
sink: {sink}
"""

# Orders met with their own landing record within a minute: `{kind} JOIN` on `{key}`.
JOIN = """\
source:
  table: dwd_orders
  join_streams:
    - table: ods_orders
      watermark: {{column: event_time, delay: 1 second}}
watermark: {{column: event_time, delay: 1 second}}
transform:
  sql: |
    SELECT o.order_id, p.order_id AS landed
    FROM source o
    {kind} JOIN ods_orders p
      ON p.order_id = {key}
     AND p.event_time >= o.event_time
     AND p.event_time <= o.event_time + INTERVAL 1 MINUTE
sink: {{mode: append}}
"""


def source_offsets(checkpoint: Path) -> list[str]:
    """The source offsets of each planned batch, in batch order (the offset log's lines
    after its version and metadata: one per source)."""
    logs = sorted(
        (p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()),
        key=lambda p: int(p.name),
    )
    return ["\n".join(p.read_text().strip().splitlines()[2:]) for p in logs]


def batches_without_input(checkpoint: Path) -> int:
    offsets = source_offsets(checkpoint)
    return sum(1 for before, after in zip(offsets, offsets[1:], strict=False) if before == after)


def test_only_queries_that_can_emit_run_batches_without_input(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    topic, proj = orders_project(tmp_path / "proj", broker.bootstrap, unique, engine=engine)
    dws = new_layer(proj, "dws")
    (dws / "closed.yml").write_text("table: dws_closed\n" + AGGREGATE.format(sink="{mode: append}"))
    (dws / "live.yml").write_text(
        "table: dws_live\n" + AGGREGATE.format(sink="{mode: upsert, keys: [window_start, user_id]}")
    )
    (dws / "paired.yml").write_text(
        "table: dws_paired\n" + JOIN.format(kind="INNER", key="o.order_id")
    )
    (dws / "unpaired.yml").write_text(  # a key no landing record has: every order unmatched
        "table: dws_unpaired\n" + JOIN.format(kind="LEFT OUTER", key="concat(o.order_id, '-')")
    )
    project = Project.load(proj, environ={})
    # One batch of orders in minutes 0, 1 and 3; the 1 s watermark then closes 0 and 1.
    produce(
        broker.bootstrap,
        topic,
        [(f"o{i}", order(f"o{i}", "u1", 1.0, minute)) for i, minute in enumerate([0, 0, 1, 3])],
    )
    for name in ("ods_orders", "dwd_orders"):  # the aggregates start on existing tables
        Pipeline(project, spark, tables=[name], bootstrap=broker.bootstrap).run(once=True)
    pipeline = Pipeline(project, spark, layer="all", bootstrap=broker.bootstrap)
    runner = threading.Thread(target=pipeline.run, kwargs={"once": False}, daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 300
        closed: list[tuple] = []
        unpaired: list[tuple] = []
        while time.monotonic() < deadline and runner.is_alive():
            try:
                closed = rows(project.table_path("dws_closed"), ["user_id", "orders"])
                unpaired = rows(project.table_path("dws_unpaired"), ["order_id", "landed"])
            except TableNotFoundError:  # not created yet, or its first commit not written
                pass
            if len(closed) == 2 and len(unpaired) == 3:
                break
            time.sleep(1)
        time.sleep(10)  # room for a batch without input, were any to come
    finally:
        pipeline.request_stop()
        runner.join(timeout=180)
    assert not runner.is_alive()

    # The append aggregate closed minutes 0 and 1 with no order after them: only a batch
    # without input can have written them.
    assert closed == [("u1", 1), ("u1", 2)]
    assert batches_without_input(Path(project.checkpoint_path("dws_closed"))) >= 1
    # The outer join's orders of minutes 0 and 1 are past the watermark (minute 3 less
    # 1 s) plus the join's minute: emitted unmatched, by a batch without input.
    assert unpaired == [("o0", None), ("o1", None), ("o2", None)]
    assert batches_without_input(Path(project.checkpoint_path("dws_unpaired"))) >= 1
    assert rows(project.table_path("dws_paired"), ["order_id", "landed"]) == [
        (f"o{i}", f"o{i}") for i in range(4)
    ]
    assert rows(project.table_path("dws_live"), ["user_id", "orders"]) == [
        ("u1", 1),
        ("u1", 1),
        ("u1", 2),
    ]
    for name in ("dwd_orders", "dws_live", "dws_paired"):
        checkpoint = Path(project.checkpoint_path(name))
        assert batches_without_input(checkpoint) == 0, (name, source_offsets(checkpoint))
