"""Only the first batch of a query's start is asked whether its table has it already.

Spark replays only the newest batch of a checkpoint's offset log, and only as the first
batch a start runs: a later batch of the same start is new, and asking the table about
it (its app transaction, then its newest commits' info) is work for nothing. Each engine,
real broker, real Spark, real Delta: three batches in one start ask once; after a crash
between the Delta commit and Spark's commit log, the next start's first batch is that
replay, asked and skipped, and no row is written twice.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.kafka.admin import produce
from tests.integration.runtime.helpers import forget_last_batch, order, orders_project, rows
from warehouse import Project
from warehouse.compile.targets import Targets
from warehouse.runtime.pipeline import Pipeline

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_only_a_starts_first_batch_is_asked_whether_it_is_a_replay(
    spark, broker, unique, tmp_path: Path, engine: str, monkeypatch
) -> None:
    topic, proj = orders_project(
        tmp_path / "proj", broker.bootstrap, unique, engine=engine, dwd=False
    )
    spec = proj / "layers" / "ods" / "orders.yml"
    spec.write_text(
        spec.read_text().replace("schema: orders}", "schema: orders, max_offsets_per_trigger: 2}")
    )
    project = Project.load(proj, environ={})
    asked: list[tuple[str, int]] = []
    committed = Targets.committed

    def counting(self: Targets, batch_id: int) -> bool:
        done = committed(self, batch_id)
        asked.append((self.table, batch_id))
        return done

    monkeypatch.setattr(Targets, "committed", counting)

    def run() -> tuple[int, int]:
        (result,) = Pipeline(project, spark, tables=["ods_orders"]).run(once=True)
        return result.batches, result.rows_written

    produce(broker.bootstrap, topic, [(f"o{i}", order(f"o{i}", "u1", 1.0, i)) for i in range(6)])
    assert run() == (3, 6)
    assert asked == [("ods_orders", 0)]

    forget_last_batch(project.checkpoint_path("ods_orders"))
    asked.clear()
    produce(broker.bootstrap, topic, [("o6", order("o6", "u1", 1.0, 6))])
    # The replay of batch 2 (asked, skipped), then batch 3 with the new order.
    assert run() == (2, 1)
    assert asked == [("ods_orders", 2)]
    ids = [r[0] for r in rows(project.table_path("ods_orders"), ["order_id"])]
    assert sorted(ids) == [f"o{i}" for i in range(7)]
