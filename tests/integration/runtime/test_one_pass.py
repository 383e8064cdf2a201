"""A landing table written in one pass gives what the persisted path gives.

Two ODS tables read the same topic with the same schema and expectations; the second
has an identity SQL transform, which sends it down the persisted path. Rows,
quarantine, quality events and counts must be equal, over two batches, and a batch
replayed after its commit must change nothing, on each engine. Real broker, real
Spark, real Delta.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from streams.delta.arrow import read_table
from streams.kafka.admin import ensure_topic, produce
from tests.integration.runtime.helpers import forget_last_batch, order, rows, version
from tests.unit.runtime.projects import write_project
from warehouse import Project
from warehouse.runtime.pipeline import Pipeline
from warehouse.spec.paths import events_path

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

EXPECTATIONS = """\
expectations:
  - expect_column_values_to_not_be_null: {column: order_id}
    on_violation: quarantine
  - expect_column_values_to_be_between: {column: amount, min_value: 0}
    on_violation: drop
  - expect_column_values_to_not_be_null: {column: user_id}
    on_violation: warn
"""
COLS = ["order_id", "user_id", "amount", "event_time", "_partition", "_offset"]
QUARANTINE_COLS = [
    "reason",
    "failed_expectations",
    "batch_id",
    "source_partition",
    "source_offset",
    "raw_value",
    "row",
]


def _tables(root: Path, topic: str) -> None:
    ods = root / "layers" / "ods"
    (ods / "orders.yml").unlink()
    source = f"source:\n  kafka: {{topic: {topic}, format: json, schema: orders}}\n"
    (ods / "one.yml").write_text(f"table: ods_one\n{source}sink: {{mode: append}}\n{EXPECTATIONS}")
    (ods / "persisted.yml").write_text(
        f"table: ods_persisted\n{source}transform:\n  sql: SELECT * FROM source\n"
        f"sink: {{mode: append}}\n{EXPECTATIONS}"
    )


def _events(project: Project, table: str) -> list[tuple]:
    t = read_table(events_path(project.root))
    return sorted(
        (r["batch_id"], r["expectation"], r["checked"], r["passed"], r["failed"])
        for r in t.to_pylist()
        if r["table"] == table
    )


def test_one_pass_equals_persisted_path_and_replays_nothing(
    spark, broker, unique, tmp_path: Path, caplog, engine
) -> None:
    topic = unique("landing")
    ensure_topic(broker.bootstrap, topic, partitions=2)
    root = write_project(
        tmp_path / "proj", topic=topic, bootstrap=broker.bootstrap, dwd=False, engine=engine
    )
    _tables(root, topic)
    # Spark's parse: these expectations would take ods_one down the Arrow path, which
    # tests/integration/quality/test_arrow_checks.py compares with Spark's.
    conf = root / "conf" / "local.yml"
    engines = "engines: {kafka: python, delta: python}"
    conf.write_text(conf.read_text().replace(engines, engines[:-1] + ", parse: spark}"))
    project = Project.load(root)
    caplog.set_level(logging.INFO, logger="warehouse.runtime.writer")

    def run() -> dict[str, object]:
        return {r.table: r for r in Pipeline(project, spark, layer="ods").run(once=True)}

    batches = [
        [
            ("a", order("o1", "u1", 10.5, 0)),
            ("b", order("o2", None, 20.0, 1)),  # warned: kept
            ("x", "not json"),  # parse error: quarantined
            ("n", order(None, "u9", 5.0, 1)),  # null order_id: quarantined
            ("m", order("o3", "u3", -1.0, 2)),  # negative amount: dropped
            ("y", '{"order_id": "o9", "amount": "lots"}'),  # wrong type: quarantined
        ],
        [(f"k{i}", order(f"o{10 + i}", "u1", float(i), 3)) for i in range(7)]
        + [("z", "[1, 2]"), ("w", order(None, None, -5.0, 4))],
    ]
    results = []
    for records in batches:
        produce(broker.bootstrap, topic, records)
        results.append(run())

    one, persisted = project.table_path("ods_one"), project.table_path("ods_persisted")
    assert rows(one, COLS) == rows(persisted, COLS)
    assert len(rows(one, COLS)) == 2 + 7
    q_one, q_persisted = (project.quarantine_path(t) for t in ("ods_one", "ods_persisted"))
    assert rows(q_one, QUARANTINE_COLS) == rows(q_persisted, QUARANTINE_COLS)
    assert [r[4] for r in rows(q_one, QUARANTINE_COLS)] != []
    assert len(rows(q_one, ["source_offset"])) == 3 + 2
    assert _events(project, "ods_one") == _events(project, "ods_persisted") != []
    for res in results:
        a, b = res["ods_one"], res["ods_persisted"]
        assert (a.rows_read, a.rows_written, a.quarantined, a.dropped) == (
            b.rows_read,
            b.rows_written,
            b.quarantined,
            b.dropped,
        )
    assert (results[0]["ods_one"].rows_written, results[0]["ods_one"].dropped) == (2, 1)
    lines = [r.getMessage() for r in caplog.records if "rows in" in r.getMessage()]
    assert sum("ods_one: batch" in m and "(one pass)" in m for m in lines) == 2
    assert not any("ods_persisted: batch" in m and "(one pass)" in m for m in lines)

    # Spark forgets it finished the last batch (as after a crash between the Delta commit
    # and its commit log): the replay finds the batch in the table and writes nothing.
    before = {p: version(p) for p in (one, q_one)}
    forget_last_batch(project.checkpoint_path("ods_one"))
    caplog.clear()
    run()
    assert {p: version(p) for p in (one, q_one)} == before
    replayed = [r.getMessage() for r in caplog.records if "ods_one: batch" in r.getMessage()]
    assert any("skipped (already committed)" in m and "(one pass)" not in m for m in replayed)
    assert rows(q_one, QUARANTINE_COLS) == rows(q_persisted, QUARANTINE_COLS)
