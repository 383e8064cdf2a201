"""A landing table on the Arrow path gives what Spark's parse gives.

Two ODS tables read the same topic with the same flat schema and no expectations:
`ods_arrow` takes the Arrow path (`streams.landing.kafka_json`); `ods_spark` has an
identity SQL transform, which keeps it on Spark's parse. Rows, quarantine and counts
must be equal over two batches, including the records Arrow hands back to Spark (a
number in a string field, `-0`, two objects in one value, invalid UTF-8, a timestamp
without an offset), those Spark quarantines, and those the Arrow tasks quarantine
themselves (a value cut off, a null value, a record without its required field). A batch replayed after its commit changes nothing. Then
`engines.parse: spark` turns the path off. On both engines: on the native ones the
Arrow tasks read the ranges Spark's own `kafka` source planned. Real broker, real
Spark, real Delta.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streams.kafka.admin import produce
from tests.integration.projects import new_topic, start_project
from tests.integration.projects import table_rows as rows
from tests.integration.runtime.helpers import forget_last_batch, version
from warehouse import Project
from warehouse.runtime.pipeline import Pipeline

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

REPO = Path(__file__).resolve().parents[3]
SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "qty": {"type": "integer", "format": "int32"},
        "amount": {"type": "number"},
        "city": {"type": "string"},
        "paid": {"type": "boolean"},
        "at": {"type": "string", "format": "date-time"},
    },
    "required": ["id"],
}
COLS = [
    "id",
    "qty",
    "amount",
    "city",
    "paid",
    "at",
    "_topic",
    "_partition",
    "_offset",
    "_timestamp",
]
QUARANTINE_COLS = [
    "reason",
    "failed_expectations",
    "batch_id",
    "source_topic",
    "source_partition",
    "source_offset",
    "source_timestamp",
    "raw_key",
    "raw_value",
    "row",
]


def _project(
    root: Path, topic: str, bootstrap: str, parse: str = "auto", engine: str = "python"
) -> Project:
    schemas = {"flat.json": json.dumps(SCHEMA)}
    ods = start_project(
        root, bootstrap, "ods", delta=engine, kafka=engine, parse=parse, schemas=schemas
    )
    source = f"source:\n  kafka: {{topic: {topic}, format: json, schema: flat}}\n"
    # Partitioned, so that both writers' partition values are compared too.
    sink = "sink: {mode: append, partition_by: [paid]}\n"
    (ods / "arrow.yml").write_text(f"table: ods_arrow\n{source}{sink}")
    (ods / "spark.yml").write_text(
        f"table: ods_spark\n{source}transform:\n  sql: SELECT * FROM source\n{sink}"
    )
    return Project.load(root)


def _good(i: int) -> str:
    return json.dumps(
        {
            "id": i,
            "qty": i % 7,
            "amount": i / 4,
            "city": f"c{i % 5} é",
            "paid": i % 2 == 0,
            "at": f"2026-11-22T{i % 24:02d}:{i % 60:02d}:{i % 60:02d}.{i:06d}+0{i % 10}:30",
        }
    )


ODD = [
    '{"id": 1, "city": 42}',  # Spark: "42"; Arrow refuses
    '{"id": 2, "amount": -0}',  # Arrow -0.0, Spark 0.0
    '{"id": 3}{"id": 4}',  # two rows for Arrow
    b'{"id": 5, "city": "\xff"}',  # invalid UTF-8 inside a string
    "{'id': 6}",  # single quotes: Spark accepts
    '{"id": 7, "qty": 3000000000}',  # int overflow: quarantined
    "not json",  # quarantined
    "[1, 2]",  # not an object: quarantined
    '{"id": "eight"}',  # wrong type: quarantined
    '{"id": 9, "extra": {"nested": [1, null]}}',
    '{"id": 10, "at": "2026-11-22T10:00:00"}',  # session time zone: Spark's to read
    '{"id": 11, "at": "2026-11-22T10:00:00+19:00"}',  # offset out of range: quarantined
    '{"id": 12, "city": "cut o',  # cut off: quarantined by the Arrow tasks themselves
    None,  # a null value: likewise
    '{"city": "no id"}',  # without its required field: likewise
    '{"id": null, "qty": 1}',
]
BAD = 9
"""The records of `ODD` quarantined."""
TASK_SPLIT = re.compile(
    r"\[(\d+) rec, fetch ([\d.]+) type ([\d.]+) judge ([\d.]+) stage ([\d.]+) "
    r"write (-?[\d.]+) = ([\d.]+)s from \+(-?[\d.]+)s, cpu ([\d.]+)s\]"
)
"""One task's records and seconds in the landing path's log line of a batch."""


def _records(first: int, n: int) -> list[tuple[str, str | bytes | None]]:
    out: list[tuple[str, str | bytes | None]] = [
        (f"k{i}", _good(i)) for i in range(first, first + n)
    ]
    for j, value in enumerate(ODD):
        out.insert(37 * (j + 1), (f"odd{j}", value))
    return out


def test_arrow_path_equals_spark_parse_and_replays_nothing(
    spark, broker, unique, tmp_path: Path, caplog, engine
) -> None:
    topic = new_topic(broker.bootstrap, unique("arrow"), partitions=2)
    project = _project(tmp_path / "proj", topic, broker.bootstrap, engine=engine)
    caplog.set_level(logging.INFO, logger="warehouse.runtime.writer")
    caplog.set_level(logging.INFO, logger="streams.landing.kafka_json")

    def run() -> dict[str, object]:
        return {r.table: r for r in Pipeline(project, spark, layer="ods").run(once=True)}

    results = []
    for first in (0, 1000):
        produce(broker.bootstrap, topic, _records(first, 600))
        results.append(run())

    arrow, plain = project.table_path("ods_arrow"), project.table_path("ods_spark")
    assert rows(arrow, COLS) == rows(plain, COLS)
    assert len(rows(arrow, COLS)) == 2 * (600 + 7)
    q_arrow, q_plain = (project.quarantine_path(t) for t in ("ods_arrow", "ods_spark"))
    assert rows(q_arrow, QUARANTINE_COLS) == rows(q_plain, QUARANTINE_COLS)
    assert len(rows(q_arrow, QUARANTINE_COLS)) == 2 * BAD
    for res in results:
        a, b = res["ods_arrow"], res["ods_spark"]
        assert (
            (a.rows_read, a.rows_written, a.quarantined)
            == (
                b.rows_read,
                b.rows_written,
                b.quarantined,
            )
            == (600 + len(ODD), 607, BAD)
        )
    lines = [r.getMessage() for r in caplog.records if "rows in" in r.getMessage()]
    assert sum("ods_arrow: batch" in m and "(Arrow)" in m for m in lines) == 2
    assert not any("ods_spark: batch" in m and "(Arrow)" in m for m in lines)
    assert not list(Path(arrow).glob("_warehouse_staging/*")), "staged records left behind"
    # Where each batch's time went: every task's parts, within the task's time; the
    # tasks' records are the batch's.
    splits = [r.getMessage() for r in caplog.records if "Arrow task(s), job" in r.getMessage()]
    assert len(splits) == 2, splits
    for m in splits:
        assert m.startswith("Delta table ods_arrow: batch "), m
        tasks = TASK_SPLIT.findall(m)
        assert tasks and sum(int(t[0]) for t in tasks) == 600 + len(ODD), m
        # This install builds the column reader, and every task's worker loads it: a
        # task on confluent-kafka's `Consumer` reads at twice the CPU (decision 0062).
        assert m.endswith(f", {len(tasks)} read Kafka with the column reader"), m
        for _, *parts, whole, _began, _cpu in tasks:
            # Each printed to 0.01 s: six roundings apart at most.
            assert all(float(x) >= 0 for x in parts), m
            assert abs(sum(map(float, parts)) - float(whole)) <= 0.035, m
    assert (
        sum(
            "ods_arrow: batch" in r.getMessage() and ", commit " in r.getMessage()
            for r in caplog.records
        )
        == 2
    )

    # Spark forgets it finished the last batch (as after a crash between the Delta commit
    # and its commit log): the replay finds the batch in the table and writes nothing.
    before = {p: version(p) for p in (arrow, q_arrow)}
    forget_last_batch(project.checkpoint_path("ods_arrow"))
    caplog.clear()
    run()
    assert {p: version(p) for p in (arrow, q_arrow)} == before
    replayed = [r.getMessage() for r in caplog.records if "ods_arrow: batch" in r.getMessage()]
    assert any("skipped (already committed)" in m for m in replayed)
    assert rows(arrow, COLS) == rows(plain, COLS)


def test_parse_spark_turns_the_arrow_path_off(
    spark, broker, unique, tmp_path: Path, caplog
) -> None:
    topic = new_topic(broker.bootstrap, unique("arrow-off"), partitions=1)
    project = _project(tmp_path / "proj", topic, broker.bootstrap, parse="spark")
    caplog.set_level(logging.INFO, logger="warehouse.runtime.writer")
    produce(broker.bootstrap, topic, _records(0, 100))
    (res,) = Pipeline(project, spark, layer="ods", tables=["ods_arrow"]).run(once=True)
    assert (res.rows_read, res.rows_written, res.quarantined) == (100 + len(ODD), 107, BAD)
    lines = [r.getMessage() for r in caplog.records if "ods_arrow: batch" in r.getMessage()]
    assert lines and all("(one pass)" in m for m in lines if "rows in" in m)


def _run_once(root: Path, log: Path, crash_point: str | None) -> int:
    """`warehouse run --table ods_arrow --once` in a child process, with `crash_point`
    armed (it is SIGKILLed there); its exit status."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(REPO)}
    env.pop("WAREHOUSE_CRASH_POINT", None)
    if crash_point is not None:
        env["WAREHOUSE_CRASH_POINT"] = crash_point
    with log.open("a") as out:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "warehouse",
                "--project",
                str(root),
                "run",
                "--table",
                "ods_arrow",
                "--once",
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=300,
        ).returncode


def test_a_crashed_arrow_task_falls_back_to_spark(broker, unique, tmp_path: Path, engine) -> None:
    """Every Arrow task's Python worker is SIGKILLed (as a crash inside Arrow's C++
    reader would): the batch is parsed by Spark instead, and the table is complete."""
    topic = new_topic(broker.bootstrap, unique("arrow-crash"), partitions=2)
    project = _project(tmp_path / "proj", topic, broker.bootstrap, engine=engine)
    produce(broker.bootstrap, topic, _records(0, 300))
    log = tmp_path / "run.log"
    rc = _run_once(tmp_path / "proj", log, "arrow_task")
    text = log.read_text()
    assert rc == 0, text[-4000:]
    assert "the Arrow tasks failed" in text, text[-4000:]
    got = rows(project.table_path("ods_arrow"), ["id", "_offset"])
    assert len(got) == 307
    q = rows(project.quarantine_path("ods_arrow"), ["source_offset"])
    assert len(q) == BAD


def test_a_crash_between_the_commits_quarantines_each_record_once(
    broker, unique, tmp_path: Path, engine
) -> None:
    """The process is SIGKILLed right after the table's commit, before the quarantine's,
    whose files the Arrow tasks had written (the known bad records'). The next run
    finds the batch in the table and writes its quarantine: every bad record once."""
    topic = new_topic(broker.bootstrap, unique("arrow-commits"), partitions=2)
    project = _project(tmp_path / "proj", topic, broker.bootstrap, engine=engine)
    produce(broker.bootstrap, topic, _records(0, 300))
    log = tmp_path / "run.log"
    assert _run_once(tmp_path / "proj", log, "after_commit") == -9, log.read_text()[-4000:]
    table, quarantine = project.table_path("ods_arrow"), Path(project.quarantine_path("ods_arrow"))
    assert len(rows(table, ["_offset"])) == 307
    assert not (quarantine / "_delta_log").exists()
    assert list(quarantine.glob("*.parquet")), "the tasks wrote no quarantine files"
    assert _run_once(tmp_path / "proj", log, None) == 0, log.read_text()[-4000:]
    assert len(rows(table, ["_offset"])) == 307
    got = rows(quarantine, ["source_partition", "source_offset", "reason"])
    assert len(got) == BAD and len({r[:2] for r in got}) == BAD
    assert sum(r[2] == "parse error: invalid JSON" for r in got) == 2  # "not json", cut off
