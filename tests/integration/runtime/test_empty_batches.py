"""A table-sourced batch that changes nothing commits nothing.

Every version of a table is a batch of each query that reads it as a stream, so an
empty version (an append of no rows, a MERGE of no changes) would cost every reader a
whole micro-batch. A table-sourced table keeps its version when a batch writes nothing;
a Kafka-sourced one still records each batch (its commits carry the offsets `warehouse
recover` starts from). Each engine, real broker, real Spark, real Delta: orders that
`dwd_orders` filters out (a negative amount) and orders below the big-order tables'
threshold leave those tables' versions where they were, their readers run no batch, a
replayed empty batch still writes nothing, and the next orders are written once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.kafka.admin import produce
from tests.integration.projects import new_layer
from tests.integration.runtime.helpers import (
    forget_last_batch,
    order,
    orders_project,
    rows,
    version,
)
from warehouse import Project
from warehouse.runtime.pipeline import Pipeline

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

# The orders of `dwd_orders` above 100, kept by upsert and as SCD2 history.
BIG = """\
source: {{table: dwd_orders}}
transform:
  sql: SELECT order_id, user_id, amount, event_time FROM source WHERE amount > 100
sink: {sink}
"""
SINKS = {
    "dws_big": "{mode: upsert, keys: [order_id]}",
    "dws_big_history": "{mode: scd2, keys: [order_id], sequence_by: event_time}",
}
# A reader of the upsert table's changes: it runs a batch for each new version.
READER = """\
table: ads_big_changes
source: {table: dws_big, read: changes}
transform:
  sql: SELECT order_id, _change_type AS change FROM source
sink: {mode: append}
"""
TABLES = ["ods_orders", "dwd_orders", *SINKS, "ads_big_changes"]


def _run(
    project: Project, spark, broker, tables: list[str] | None = None
) -> dict[str, tuple[int, int, int | None]]:
    """One run of `tables` (default: every table), in order; per table (batches, rows
    written, version)."""
    pipeline = Pipeline(project, spark, tables=tables or TABLES, bootstrap=broker.bootstrap)
    results = pipeline.run(once=True)
    return {r.table: (r.batches, r.rows_written, r.version) for r in results}


def test_a_table_sourced_batch_that_writes_nothing_commits_nothing(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    topic, proj = orders_project(tmp_path / "proj", broker.bootstrap, unique, engine=engine)
    dws = new_layer(proj, "dws")
    for name, sink in SINKS.items():
        (dws / f"{name}.yml").write_text(f"table: {name}\n" + BIG.format(sink=sink))
    (proj / "layers" / "ads").mkdir()
    (proj / "layers" / "ads" / "big_changes.yml").write_text(READER)
    project = Project.load(proj, environ={})
    path = {t: project.table_path(t) for t in TABLES}

    produce(broker.bootstrap, topic, [("o1", order("o1", "u1", 150.0, 0))])
    first = _run(project, spark, broker)
    assert {t: first[t][:2] for t in TABLES} == {t: (1, 1) for t in TABLES}
    versions = {t: version(path[t]) for t in TABLES}

    # Filtered out by dwd_orders: its batch reads two rows and writes none.
    produce(
        broker.bootstrap,
        topic,
        [(f"n{i}", order(f"n{i}", "u1", -1.0, 1)) for i in range(2)],
    )
    second = _run(project, spark, broker)
    assert second["ods_orders"][:2] == (1, 2)
    assert version(path["ods_orders"]) == versions["ods_orders"] + 1
    assert second["dwd_orders"] == (1, 0, versions["dwd_orders"])
    assert version(path["dwd_orders"]) == versions["dwd_orders"]
    for reader in [*SINKS, "ads_big_changes"]:  # no new version read: no batch
        assert second[reader][0] == 0, (reader, second[reader])

    # Below the threshold: the big-order tables' batches write nothing; no change to read.
    produce(broker.bootstrap, topic, [("o2", order("o2", "u1", 5.0, 2))])
    third = _run(project, spark, broker)
    assert third["dwd_orders"][:2] == (1, 1)
    for name in SINKS:
        assert third[name] == (1, 0, versions[name]), (name, third[name])
        assert version(path[name]) == versions[name]
    assert third["ads_big_changes"][0] == 0

    # A replayed empty batch (Spark forgot it finished it) writes nothing again.
    for name in SINKS:
        forget_last_batch(Path(project.checkpoint_path(name)))
    replay = _run(project, spark, broker, list(SINKS))  # the others have nothing new
    for name in SINKS:
        assert replay[name] == (1, 0, versions[name]), (name, replay[name])
        assert version(path[name]) == versions[name]

    # The next big order is written once, and read once downstream.
    produce(broker.bootstrap, topic, [("o3", order("o3", "u1", 300.0, 3))])
    fourth = _run(project, spark, broker)
    for name in SINKS:
        assert fourth[name][:2] == (1, 1)
        assert version(path[name]) == versions[name] + 1
    assert rows(path["dws_big"], ["order_id", "amount"]) == [("o1", 150.0), ("o3", 300.0)]
    assert rows(path["dws_big_history"], ["order_id", "is_current"]) == [
        ("o1", True),
        ("o3", True),
    ]
    assert fourth["ads_big_changes"][:2] == (1, 1)
    assert rows(path["ads_big_changes"], ["order_id", "change"]) == [
        ("o1", "insert"),
        ("o3", "insert"),
    ]
