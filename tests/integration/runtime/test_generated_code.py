"""A continuous query whose watermark evicts state generates no code per batch.

Spark's stateful operators write each batch's watermark as a literal into the
predicates that evict state and drop late rows, so with code generation a batch that
moves the watermark compiles new classes (janino, then the JIT). The framework runs such
queries with expressions interpreted outside whole-stage code (decision 0049). Real
broker, real Spark, real Delta, both engines: a continuous run of the two-layer project
and an upsert aggregate over `dwd_orders`; one order a round, each a minute later than
the last, so each round moves both stateful queries' watermarks. After two rounds have
warmed the plans' caches, the rounds after them must make Spark compile nothing, and
the aggregate must hold every window.
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
table: dws_minutes
source: {table: dwd_orders}
watermark: {column: event_time, delay: 1 second}
aggregate:
  window: {column: event_time, size: 1 minute}
  group_by: [user_id]
  measures: {orders: count(*)}
sink: {mode: upsert, keys: [window_start, user_id]}
"""

WARM_ROUNDS = 2
ROUNDS = 6


def compilations(spark) -> int:
    """Classes Spark's code generator compiled in this JVM so far (its codegen metrics)."""
    metrics = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


def test_batches_that_move_the_watermark_compile_nothing(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    topic, proj = orders_project(tmp_path / "proj", broker.bootstrap, unique, engine=engine)
    (new_layer(proj, "dws") / "minutes.yml").write_text(AGGREGATE)
    project = Project.load(proj, environ={})
    produce(broker.bootstrap, topic, [("o0", order("o0", "u1", 1.0, 0))])
    for name in ("ods_orders", "dwd_orders"):  # the aggregate starts on an existing table
        Pipeline(project, spark, tables=[name], bootstrap=broker.bootstrap).run(once=True)
    pipeline = Pipeline(project, spark, layer="all", bootstrap=broker.bootstrap)
    runner = threading.Thread(target=pipeline.run, kwargs={"once": False}, daemon=True)
    runner.start()
    compiled: list[int] = []
    try:
        for minute in range(1, ROUNDS + 1):
            produce(
                broker.bootstrap, topic, [(f"o{minute}", order(f"o{minute}", "u1", 1.0, minute))]
            )
            deadline = time.monotonic() + 180
            windows: list[tuple] = []
            while time.monotonic() < deadline and runner.is_alive():
                try:
                    windows = rows(project.table_path("dws_minutes"), ["window_start"])
                except TableNotFoundError:  # its first commit not written yet
                    pass
                if len(windows) == minute + 1:
                    break
                time.sleep(0.5)
            assert len(windows) == minute + 1, (minute, windows)
            compiled.append(compilations(spark))
    finally:
        pipeline.request_stop()
        runner.join(timeout=180)
    assert not runner.is_alive()

    assert rows(project.table_path("dws_minutes"), ["user_id", "orders"]) == [("u1", 1)] * (
        ROUNDS + 1
    )
    per_round = [b - a for a, b in zip(compiled, compiled[1:], strict=False)]
    assert sum(per_round[WARM_ROUNDS - 1 :]) == 0, per_round
