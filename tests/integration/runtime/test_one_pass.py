"""A table written in one pass gives what the persisted path gives.

Two ODS tables read the same topic with the same schema and expectations; the second
has an identity SQL transform, which sends it down the persisted path (and so do two
SCD2 tables, and table-sourced tables further down). Rows,
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
    history = "sink: {mode: scd2, keys: [order_id], sequence_by: event_time}\n"
    (ods / "history.yml").write_text(f"table: ods_history\n{source}{history}{EXPECTATIONS}")
    # A transform would change what the parse holds to the keys; an expectation that can
    # fail the batch (and never does here) sends it down the persisted path instead.
    never_fails = (
        "  - expect_column_values_to_not_be_null: {column: event_time}\n    on_violation: fail\n"
    )
    (ods / "history_persisted.yml").write_text(
        f"table: ods_history_persisted\n{source}{history}{EXPECTATIONS}{never_fails}"
    )


def _events(project: Project, table: str) -> list[tuple]:
    t = read_table(events_path(project.root))
    return sorted(
        (r["batch_id"], r["expectation"], r["checked"], r["passed"], r["failed"])
        for r in t.to_pylist()
        if r["table"] == table
    )


def _counts(results: list[dict], table: str) -> list[tuple]:
    """Per run, the table's (rows read, written, quarantined, dropped)."""
    return [
        (r.rows_read, r.rows_written, r.quarantined, r.dropped)
        for r in (res[table] for res in results)
    ]


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
    engines = f"engines: {{kafka: {engine}, delta: {engine}}}"
    conf.write_text(conf.read_text().replace(engines, engines[:-1] + ", parse: spark}"))
    project = Project.load(root)
    caplog.set_level(logging.INFO, logger="warehouse.runtime.writer")
    caplog.set_level(logging.INFO, logger="warehouse.write.one_pass")

    def run(tables: list[str] | None = None) -> dict[str, object]:
        pipeline = Pipeline(project, spark, layer="ods", tables=tables)
        return {r.table: r for r in pipeline.run(once=True)}

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
    assert _counts(results, "ods_one") == _counts(results, "ods_persisted")
    assert (results[0]["ods_one"].rows_written, results[0]["ods_one"].dropped) == (2, 1)
    # The rows that failed the `warn` expectation (kept) are counted for the run line: in
    # each batch one order without a user_id.
    warned = [r["ods_one"].warned for r in results]
    assert warned == [r["ods_persisted"].warned for r in results]
    assert warned == [{"expect_column_values_to_not_be_null(user_id)": 1}] * 2
    # SCD2 history: one version per order id, from either path
    history_cols = ["order_id", "user_id", "amount", "valid_from", "valid_to", "is_current"]
    history = rows(project.table_path("ods_history"), history_cols)
    assert history == rows(project.table_path("ods_history_persisted"), history_cols)
    assert len(history) == 2 + 7 and all(r[-1] for r in history)
    shared = [e for e in _events(project, "ods_history_persisted") if "event_time" not in e[1]]
    assert _events(project, "ods_history") == shared != []
    assert _counts(results, "ods_history") == _counts(results, "ods_history_persisted")
    lines = [r.getMessage() for r in caplog.records if "rows in" in r.getMessage()]
    assert sum("ods_one: batch" in m and "(one pass)" in m for m in lines) == 2
    assert not any("ods_persisted: batch" in m and "(one pass)" in m for m in lines)
    assert sum("ods_history: batch" in m and "(one pass)" in m for m in lines) == 2
    # The one-pass table's second pass parsed only the records its first pass set aside:
    # three in the first batch (two that do not parse, a null order_id), two in the second.
    again = [
        r.getMessage() for r in caplog.records if "read again for its quarantine" in r.getMessage()
    ]
    assert [m for m in again if "table ods_one:" in m] == [
        f"table ods_one: batch {b}: {n} record(s) of the batch read again for its quarantine"
        for b, n in ((0, 3), (1, 2))
    ]
    # The native SCD2 path builds its MERGE source on the batch's own session (a clone);
    # the caller's session is the active one again once the runs are over.
    from pyspark.sql import SparkSession

    assert SparkSession.getActiveSession() is spark

    # Spark forgets it finished the last batch (as after a crash between the Delta commit
    # and its commit log): the replay finds the batch in the table and writes nothing.
    before = {p: version(p) for p in (one, q_one)}
    forget_last_batch(project.checkpoint_path("ods_one"))
    caplog.clear()
    run(["ods_one"])  # the others have nothing new
    assert {p: version(p) for p in (one, q_one)} == before
    replayed = [r.getMessage() for r in caplog.records if "ods_one: batch" in r.getMessage()]
    assert any("skipped (already committed)" in m and "(one pass)" not in m for m in replayed)
    assert rows(q_one, QUARANTINE_COLS) == rows(q_persisted, QUARANTINE_COLS)


TABLE_EXPECTATIONS = """\
  - expect_column_values_to_be_between: {column: amount, min_value: 0}
    on_violation: drop
  - expect_column_values_to_not_be_null: {column: user_id}
    on_violation: warn
"""
# Never fails (the ODS table quarantines a null order_id) but sends a table-sourced table
# down the persisted path: its quarantine could not come from computing the batch again.
QUARANTINING = """\
  - expect_column_values_to_not_be_null: {column: order_id}
    on_violation: quarantine
"""


def _dwd_tables(root: Path) -> None:
    dwd = root / "layers" / "dwd"
    (dwd / "orders.yml").unlink()
    head = (
        "source: {table: ods_orders}\n"
        "watermark: {column: event_time, delay: 1 hour}\n"
        "dedupe: {keys: [order_id]}\n"
    )
    for name, sink, checks in [
        ("dwd_one", "{mode: append}", TABLE_EXPECTATIONS),
        ("dwd_persisted", "{mode: append}", TABLE_EXPECTATIONS + QUARANTINING),
        ("dwd_latest", "{mode: upsert, keys: [order_id]}", ""),
        ("dwd_latest_persisted", "{mode: upsert, keys: [order_id]}", QUARANTINING),
    ]:
        expectations = f"expectations:\n{checks}" if checks else ""
        (dwd / f"{name}.yml").write_text(f"table: {name}\n{head}sink: {sink}\n{expectations}")


def test_table_sourced_one_pass_equals_persisted_path(
    spark, broker, unique, tmp_path: Path, caplog, engine
) -> None:
    """A table-sourced table (here after a dedupe, stateful) without an expectation that
    quarantines is written in one pass, appended on either engine and upserted on the
    Python one: rows, counts and quality events as on the persisted path, and a replay
    writes nothing."""
    topic = unique("table-one-pass")
    ensure_topic(broker.bootstrap, topic, partitions=2)
    root = write_project(tmp_path / "proj", topic=topic, bootstrap=broker.bootstrap, engine=engine)
    _dwd_tables(root)
    project = Project.load(root)
    caplog.set_level(logging.INFO, logger="warehouse.runtime.writer")

    def run(tables: list[str] | None = None) -> dict[str, object]:
        pipeline = Pipeline(project, spark, layer="all", tables=tables)
        return {r.table: r for r in pipeline.run(once=True)}

    batches = [
        [
            ("a", order("o1", "u1", 10.5, 0)),
            ("b", order("o2", None, 20.0, 1)),  # warned: kept
            ("m", order("o3", "u3", -1.0, 2)),  # negative amount: dropped
            ("n", order(None, "u9", 5.0, 1)),  # quarantined by the ODS table
            ("d", order("o1", "u1", 10.5, 0)),  # a duplicate: deduped
        ],
        [(f"k{i}", order(f"o{10 + i}", "u1", float(i), 3)) for i in range(5)]
        + [("e", order("o2", "u2", 21.0, 4)), ("w", order("o20", None, -5.0, 4))],
    ]
    results = []
    for records in batches:
        produce(broker.bootstrap, topic, records)
        results.append(run())

    cols = ["order_id", "user_id", "amount", "event_time"]
    one, persisted = project.table_path("dwd_one"), project.table_path("dwd_persisted")
    assert rows(one, cols) == rows(persisted, cols)
    assert len(rows(one, cols)) == 2 + 5
    latest = project.table_path("dwd_latest")
    assert rows(latest, cols) == rows(project.table_path("dwd_latest_persisted"), cols)
    assert len(rows(latest, cols)) == 3 + 6
    shared = [e for e in _events(project, "dwd_persisted") if "order_id" not in e[1]]
    assert _events(project, "dwd_one") == shared != []
    assert _counts(results, "dwd_one") == _counts(results, "dwd_persisted")
    assert _counts(results, "dwd_latest") == _counts(results, "dwd_latest_persisted")
    first = results[0]["dwd_one"]
    # read: the ODS rows before the dedupe; written and dropped: after it
    assert (first.rows_read, first.rows_written, first.dropped) == (4, 2, 1)
    lines = [r.getMessage() for r in caplog.records if "rows in" in r.getMessage()]

    def one_pass(table: str) -> int:
        return sum(f"{table}: batch" in m and "(one pass)" in m for m in lines)

    assert one_pass("dwd_one") == 2
    assert one_pass("dwd_latest") == (2 if engine == "python" else 0)
    assert one_pass("dwd_persisted") == one_pass("dwd_latest_persisted") == 0

    before = version(one)
    forget_last_batch(project.checkpoint_path("dwd_one"))
    caplog.clear()
    run(["dwd_one"])  # the others have nothing new
    assert version(one) == before
    replayed = [r.getMessage() for r in caplog.records if "dwd_one: batch" in r.getMessage()]
    assert any("skipped (already committed)" in m for m in replayed)
    assert rows(one, cols) == rows(persisted, cols)
