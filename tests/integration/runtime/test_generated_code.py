"""A continuous dedupe whose watermark evicts its state generates no code per batch.

Spark's stateful operators write each batch's watermark as a literal into the
predicates that evict state and drop late rows, so with code generation a batch that
moves the watermark compiles new classes (janino, then the JIT). The framework runs a
query whose only state is such a dedupe with expressions interpreted outside whole-stage
code (decision 0047). Real broker, real Spark, real Delta, both engines: a continuous
run of the two-layer project (`dwd_orders` dedupes `ods_orders` by `order_id` within a
watermark); one order a round, each a minute later than the last, so each round moves
the watermark. After two rounds have warmed the plans' caches, the rounds after them
must make Spark compile nothing, and `dwd_orders` must hold every order once.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from streams.kafka.admin import produce
from tests.integration.runtime.helpers import order, orders_project, rows
from warehouse import Project
from warehouse.runtime.pipeline import Pipeline

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

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
    project = Project.load(proj, environ={})
    produce(broker.bootstrap, topic, [("o0", order("o0", "u1", 1.0, 0))])
    for name in ("ods_orders", "dwd_orders"):  # dwd_orders starts on an existing table
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
            orders: list[tuple] = []
            while time.monotonic() < deadline and runner.is_alive():
                orders = rows(project.table_path("dwd_orders"), ["order_id"])
                if len(orders) == minute + 1:
                    break
                time.sleep(0.5)
            assert len(orders) == minute + 1, (minute, orders)
            compiled.append(compilations(spark))
    finally:
        pipeline.request_stop()
        runner.join(timeout=180)
    assert not runner.is_alive()

    assert rows(project.table_path("dwd_orders"), ["order_id"]) == sorted(
        (f"o{minute}",) for minute in range(ROUNDS + 1)
    )
    per_round = [b - a for a, b in zip(compiled, compiled[1:], strict=False)]
    assert sum(per_round[WARM_ROUNDS - 1 :]) == 0, per_round
