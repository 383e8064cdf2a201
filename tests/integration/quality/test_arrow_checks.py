"""Row-level expectations judged on the Arrow path give what Spark's path gives.

Two ODS tables read the same topic with the same schema and expectations (quarantine,
drop and warn; not-null, between, in-set, lengths): `ods_arrow` takes the Arrow path,
its expectations judged in the Arrow tasks; `ods_spark` has an identity SQL transform,
which keeps it on Spark's parse and `RowChecks.apply`. Rows, quarantine rows (reasons,
failed expectations, the quarantined row's JSON), quality events and counts must be
equal over two batches (and a batch replayed after its commits changes nothing),
including records Arrow hands back to Spark's parse (which are
then judged by Spark on the driver) and records that do not parse. A table with an
expectation Arrow does not judge (a regex) keeps off the Arrow path. Both send their
quarantined records to dead-letter topics too (`quarantine: {kafka: {topic}}`): each
holds exactly the quarantined records, once each, with their original key and value
bytes, after the replay as well; the run counts them and `warehouse status` and the
pipeline page's view show them all sent. Real broker, real Spark, real Delta.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from streams.delta.arrow import read_table
from streams.kafka.admin import produce
from tests.integration.projects import new_topic, start_project
from tests.integration.quality.dead_letters import assert_dead_letters
from tests.integration.runtime.helpers import forget_last_batch, version
from warehouse import Project
from warehouse.runtime.pipeline import Pipeline
from warehouse.runtime.status import status
from warehouse.spec.paths import events_path
from warehouse.ui import PipelineView

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "qty": {"type": "integer", "format": "int32"},
        "amount": {"type": "number"},
        "city": {"type": "string"},
        "at": {"type": "string", "format": "date-time"},
    },
}
EXPECTATIONS = """\
expectations:
  - expect_column_values_to_not_be_null: {column: id}
    on_violation: quarantine
  - expect_column_values_to_be_between: {column: amount, min_value: 0}
    on_violation: drop
  - expect_column_values_to_be_in_set: {column: city, value_set: [Oslo, Bergen]}
    on_violation: warn
  - expect_column_value_lengths_to_be_between: {column: city, max_value: 6}
    on_violation: quarantine
  - expect_column_values_to_be_between: {column: qty, min_value: 1, max_value: 9}
    on_violation: quarantine
"""
COLS = ["id", "qty", "amount", "city", "at", "_partition", "_offset", "_timestamp"]
QUARANTINE_COLS = [
    "reason",
    "failed_expectations",
    "batch_id",
    "source_partition",
    "source_offset",
    "source_timestamp",
    "raw_value",
    "row",
]
ODD = [
    '{"id": null, "qty": 2, "amount": 1.5, "city": "Oslo", "at": "2026-11-26T01:02:03Z"}',  # held
    '{"qty": 2, "amount": -1, "city": "Oslo"}',  # no id, negative: quarantined, lists both
    '{"id": 3, "qty": 2, "amount": -0.5, "city": "Oslo"}',  # dropped
    '{"id": 4, "qty": 2, "amount": 2, "city": "Paris"}',  # warned, kept
    '{"id": 5, "qty": 2, "amount": 2, "city": "Trondheim"}',  # too long: quarantined
    '{"id": 6, "qty": 0, "amount": 2, "city": "Oslo"}',  # qty below 1: quarantined
    '{"id": 7, "qty": 2, "amount": 2, "city": 1234567}',  # Spark's: "1234567", too long
    # Spark's (a number for a string, a time without an offset): quarantined, no id
    '{"id": null, "qty": 2, "amount": 2, "city": 42, "at": "2026-11-26T01:02:03"}',
    '{"id": 9, "qty": 2, "amount": -3, "city": 42}',  # Spark's: dropped
    "{'id': 10, 'qty': 12, 'amount': 1}",  # single quotes, Spark's: qty too big
    '{"id": 11, "qty": 2, "amount": -1, "city": "Bergen!!"}',  # dropped and quarantined
    "not json",  # parse error: quarantined
    '{"id": 12, "qty": 2, "amo',  # cut off: quarantined by the tasks, beside the held rows
]


def _good(i: int) -> str:
    return json.dumps(
        {
            "id": i,
            "qty": 1 + i % 9,
            "amount": i / 4,
            "city": ("Oslo", "Bergen")[i % 2],
            "at": f"2026-11-26T{i % 24:02d}:{i % 60:02d}:00.{i:06d}+01:00",
        }
    )


OLD = '{"id": null, "qty": 2, "amount": 1.5, "city": "Oslo", "at": "0999-12-31T23:59:59Z"}'
"""Held by the not-null expectation, with a year the driver does not write (`row_json`):
in the second batch, Spark builds the held rows' quarantine rows."""


def _records(first: int, n: int) -> list[tuple[str, str]]:
    out = [(f"k{i}", _good(i)) for i in range(first, first + n)]
    for j, value in enumerate(ODD + ([OLD] if first else [])):
        out.insert(29 * (j + 1), (f"odd{j}", value))
    return out


def rows(path: Path, columns: list[str]) -> list[tuple]:
    table = read_table(str(path), columns=columns)
    return sorted(
        (tuple(tuple(v) if isinstance(v, list) else v for v in (r[c] for c in columns))
         for r in table.to_pylist()),
        key=repr,
    )  # fmt: skip


def _events(project: Project, table: str) -> list[tuple]:
    t = read_table(str(events_path(project.root)))
    return sorted(
        (r["batch_id"], r["expectation"], r["checked"], r["passed"], r["failed"], r["on_violation"])
        for r in t.to_pylist()
        if r["table"] == table
    )


def _dlq(topic: str, table: str) -> str:
    return f"{topic}.dlq.{table}"


def _project(root: Path, topic: str, bootstrap: str, engine: str) -> Project:
    schemas = {"flat.json": json.dumps(SCHEMA)}
    ods = start_project(root, bootstrap, "ods", delta=engine, kafka=engine, schemas=schemas)
    source = f"source:\n  kafka: {{topic: {topic}, format: json, schema: flat}}\n"
    sink = "sink: {mode: append}\n"
    dlq = "quarantine: {{kafka: {{topic: {}, partitions: 2}}}}\n"
    (ods / "arrow.yml").write_text(
        f"table: ods_arrow\n{source}{sink}{dlq.format(_dlq(topic, 'arrow'))}{EXPECTATIONS}"
    )
    (ods / "spark.yml").write_text(
        f"table: ods_spark\n{source}transform:\n  sql: SELECT * FROM source\n{sink}"
        f"{dlq.format(_dlq(topic, 'spark'))}{EXPECTATIONS}"
    )
    (ods / "regex.yml").write_text(
        f"table: ods_regex\n{source}{sink}expectations:\n"
        "  - expect_column_values_to_match_regex: {column: city, regex: '^[A-Z]'}\n"
        "    on_violation: quarantine\n"
    )
    return Project.load(root)


def test_expectations_on_the_arrow_path_equal_spark_path(
    spark, broker, unique, tmp_path: Path, caplog, engine
) -> None:
    topic = new_topic(broker.bootstrap, unique("arrow-checks"), partitions=2)
    project = _project(tmp_path / "proj", topic, broker.bootstrap, engine)
    caplog.set_level(logging.INFO, logger="warehouse.runtime.writer")

    results = []
    for first in (0, 1000):
        produce(broker.bootstrap, topic, _records(first, 400))
        results.append({r.table: r for r in Pipeline(project, spark, layer="ods").run(once=True)})

    lines = [r.getMessage() for r in caplog.records if "rows in" in r.getMessage()]
    assert sum("ods_arrow: batch" in m and "(Arrow)" in m for m in lines) == 2, lines
    assert not any("ods_spark: batch" in m and "(Arrow)" in m for m in lines)
    assert sum("ods_regex: batch" in m and "(one pass)" in m for m in lines) == 2, lines

    arrow, plain = project.table_path("ods_arrow"), project.table_path("ods_spark")
    assert rows(arrow, COLS) == rows(plain, COLS)
    # Per batch: 400 good and ODD 3 (Paris: warned) kept; ODD 2 and 8 dropped.
    assert len(rows(arrow, COLS)) == 2 * (400 + 1)
    # The held rows' quarantine rows: built by the driver in the first batch, by Spark
    # in the second (OLD), equal to Spark's path's in both.
    q_arrow, q_plain = (project.quarantine_path(t) for t in ("ods_arrow", "ods_spark"))
    assert rows(q_arrow, QUARANTINE_COLS) == rows(q_plain, QUARANTINE_COLS)
    quarantined = rows(q_arrow, ["reason", "failed_expectations"])
    assert len(quarantined) == 2 * 10 + 1
    assert sum(r.startswith("parse error:") for r, _ in quarantined) == 2 * 2
    # ODD 1 fails the not-null and the drop: quarantined, both listed in Spark's words.
    assert (
        "failed expectations: expect_column_values_to_not_be_null(id), "
        "expect_column_values_to_be_between(amount)",
        ("expect_column_values_to_not_be_null(id)", "expect_column_values_to_be_between(amount)"),
    ) in quarantined

    assert _events(project, "ods_arrow") == _events(project, "ods_spark")
    assert len(_events(project, "ods_arrow")) == 2 * 5
    for res in results:
        a, b = res["ods_arrow"], res["ods_spark"]
        assert (a.rows_read, a.rows_written, a.quarantined, a.dropped) == (
            b.rows_read,
            b.rows_written,
            b.quarantined,
            b.dropped,
        )
    assert [(r["ods_arrow"].rows_read, r["ods_arrow"].quarantined) for r in results] == [
        (413, 10),
        (414, 11),
    ]
    for res in results:
        a = res["ods_arrow"]
        assert (a.rows_written, a.dropped) == (401, 2)
        # Each batch sent its quarantined records as dead letters; a table without a
        # dead-letter topic counts none.
        assert a.dead_letters == res["ods_spark"].dead_letters == a.quarantined
        assert res["ods_regex"].dead_letters is None
        assert f", {a.quarantined} dead letters sent," in a.line()
    # The run line counts the rows that failed the `warn` expectation, as its quality
    # events do, on either path.
    in_set = "expect_column_values_to_be_in_set(city)"
    failed = [e[4] for e in _events(project, "ods_arrow") if e[1] == in_set]
    assert [r["ods_arrow"].warned for r in results] == [{in_set: n} for n in failed]
    assert [r["ods_spark"].warned for r in results] == [{in_set: n} for n in failed]
    assert all(failed)
    assert not list(Path(arrow).glob("_warehouse_staging/*")), "staged records left behind"

    def dead_letters(sent: dict[str, int]) -> None:
        for name in ("arrow", "spark"):
            table = f"ods_{name}"
            dlq, q = _dlq(topic, name), project.quarantine_path(table)
            assert assert_dead_letters(broker.bootstrap, dlq, topic, q, table) == 2 * 10 + 1
        # `warehouse status` (and its --json) says where they go and that all are sent.
        shown = {r["table"]: r for r in status(project, bootstrap=broker.bootstrap)}
        for name in ("arrow", "spark"):
            newest = version(project.quarantine_path(f"ods_{name}"))
            assert shown[f"ods_{name}"]["dead_letters"] == {
                "topic": _dlq(topic, name),
                "quarantine_version": newest,
                "sent_version": newest,
                "versions_behind": 0,
            }
        assert "dead_letters" not in shown["ods_regex"]
        # The pipeline page shows the same, read with the consumer it keeps per cluster.
        view = PipelineView(project)
        try:
            page = view.snapshot()["tables"]
        finally:
            view.close()
        for name in ("arrow", "spark"):
            newest = version(project.quarantine_path(f"ods_{name}"))
            shown_dl = page[f"ods_{name}"]["dead_letters"]
            assert (shown_dl["topic"], shown_dl["progress"], shown_dl["text"]) == (
                _dlq(topic, name),
                "up to date",
                f"sent through version {newest} of quarantine version {newest} (up to date)",
            )
            # ... and the dead letters its run's last batch sent.
            assert page[f"ods_{name}"]["last_batch"]["dead_letters"] == sent[name]
        assert page["ods_regex"]["dead_letters"] is None

    dead_letters({n: results[-1][f"ods_{n}"].dead_letters for n in ("arrow", "spark")})

    # Spark forgets it finished the last batch (as after a crash between the commits and
    # its commit log): the replay finds the batch in the table, the quarantine and the
    # quality events, and writes nothing.
    events = events_path(project.root)
    before = {p: version(p) for p in (arrow, q_arrow, events)}
    forget_last_batch(project.checkpoint_path("ods_arrow"))
    caplog.clear()
    (again,) = Pipeline(project, spark, layer="ods", tables=["ods_arrow"]).run(once=True)
    assert again.dead_letters == 0
    assert {p: version(p) for p in (arrow, q_arrow, events)} == before
    replayed = [r.getMessage() for r in caplog.records if "ods_arrow: batch" in r.getMessage()]
    assert any("skipped (already committed)" in m for m in replayed), replayed
    assert rows(q_arrow, QUARANTINE_COLS) == rows(q_plain, QUARANTINE_COLS)
    assert _events(project, "ods_arrow") == _events(project, "ods_spark")
    # The replay sent none twice.
    dead_letters({"arrow": again.dead_letters, "spark": results[-1]["ods_spark"].dead_letters})
