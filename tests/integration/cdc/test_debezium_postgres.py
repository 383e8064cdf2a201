"""Real CDC: PostgreSQL -> Debezium's Postgres connector on Kafka Connect -> the bundled
broker and Apache Kafka -> a warehouse project's SCD1 and SCD2 tables, on both engines.

Nothing here writes a change event by hand. A PostgreSQL server (logical decoding,
tests/support/postgres.py) holds one table per (broker, engine) case. One standalone
Connect worker (tests/support/kafka_connect.py) runs two Debezium connectors
(`plugin.name=pgoutput`): one writes its topics to the bundled broker, the other to
Apache Kafka (`producer.override.bootstrap.servers`, KIP-458), each taking an initial
snapshot of its two tables and then streaming their changes. A case's project reads its
table's topic with `format: debezium-json, connect_schema: true` into an `upsert` (SCD1)
and an `scd2` table, both `sequence_by: _source_lsn`.

After the snapshot and a round of transactions (one row changed several times in one
transaction, deletes, delete-then-reinsert of a key, a key inserted, changed and deleted
in one transaction), `run --once`; then a second round and `run --once` again. After each
run the SCD1 table and the SCD2 table's current rows are exactly `SELECT * FROM` the
database table, every column.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from streams.delta.arrow import read_table
from tests.integration.projects import start_project
from tests.support.kafka_connect import DEBEZIUM_POSTGRES, ConnectWorker, started
from tests.support.postgres import DATABASE, SUPERUSER, Postgres
from warehouse import Project
from warehouse.runtime.pipeline import Pipeline

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

BROKERS = ("bundled", "apache")
BATCH = 16
ENGINES = ("python", "native")
COLUMNS = """
    id integer PRIMARY KEY,
    name text NOT NULL,
    city text,
    visits bigint,
    score double precision,
    active boolean
"""
INITIAL = [(i, f"user{i}", f"city{i % 3}", i * 10, i / 4, i % 2 == 0) for i in range(1, 9)]
ROUND_1 = [
    ["UPDATE {t} SET name = 'bea' WHERE id = 2"],
    ["DELETE FROM {t} WHERE id = 3"],
    # delete then reinsert of a key in one transaction
    [
        "DELETE FROM {t} WHERE id = 4",
        "INSERT INTO {t} VALUES (4, 'dan', 'bern', 1, 0.5, true)",
    ],
    # one row changed three times in one transaction (one commit time): offsets 14, 15, 16
    [
        "UPDATE {t} SET city = 'oslo' WHERE id = 1",
        "UPDATE {t} SET city = 'rome', visits = visits + 1 WHERE id = 1",
        "UPDATE {t} SET city = 'pisa' WHERE id = 1",
    ],
    # a key inserted, changed and deleted in one transaction: never there
    [
        "INSERT INTO {t} VALUES (9, 'ivy', 'lima', 0, 0, false)",
        "UPDATE {t} SET city = 'kyiv' WHERE id = 9",
        "DELETE FROM {t} WHERE id = 9",
    ],
    [
        "INSERT INTO {t} VALUES (10, 'joe', NULL, NULL, NULL, NULL)",
        "UPDATE {t} SET city = 'nice', score = 1.5 WHERE id = 10",
        "UPDATE {t} SET visits = 7, active = false WHERE id = 10",
    ],
    ["UPDATE {t} SET city = NULL, score = NULL WHERE id = 5"],
]
ROUND_2 = [
    # delete, reinsert and change of a key in one transaction
    [
        "DELETE FROM {t} WHERE id = 1",
        "INSERT INTO {t} VALUES (1, 'amy', 'faro', 0, 2.25, false)",
        "UPDATE {t} SET visits = 3 WHERE id = 1",
    ],
    # a key deleted in the first round inserted again, then changed
    ["INSERT INTO {t} VALUES (3, 'cy', 'graz', 5, 0.75, true)"],
    ["UPDATE {t} SET name = 'cyd' WHERE id = 3", "DELETE FROM {t} WHERE id = 2"],
    # every row at once, then one of them twice more
    [
        "UPDATE {t} SET visits = coalesce(visits, 0) + 100",
        "UPDATE {t} SET score = 9.5 WHERE id = 10",
        "UPDATE {t} SET score = 10.5 WHERE id = 10",
    ],
    # deleted, back, deleted again: gone
    [
        "DELETE FROM {t} WHERE id = 6",
        "INSERT INTO {t} VALUES (6, 'fay', 'ulm', 1, 1, true)",
        "DELETE FROM {t} WHERE id = 6",
    ],
]


@dataclass
class Capture:
    """The database, the worker and the Kafka of each connector."""

    postgres: Postgres
    worker: ConnectWorker
    bootstraps: dict[str, str]
    records: dict[str, int]
    """Change events (tombstones included) each case's topic should hold by now."""

    @staticmethod
    def table(kafka: str, engine: str) -> str:
        return f"users_{kafka}_{engine}"

    @staticmethod
    def topic(kafka: str, engine: str) -> str:
        return f"{kafka}.public.{Capture.table(kafka, engine)}"


def _connector(postgres: Postgres, kafka: str, bootstrap: str, worker: ConnectWorker) -> dict:
    config = {
        "connector.class": DEBEZIUM_POSTGRES,
        "tasks.max": "1",
        "plugin.name": "pgoutput",
        "database.hostname": "127.0.0.1",
        "database.port": str(postgres.port),
        "database.user": SUPERUSER,
        "database.dbname": DATABASE,
        "topic.prefix": kafka,
        "slot.name": f"debezium_{kafka}",
        "publication.name": f"debezium_{kafka}",
        "publication.autocreate.mode": "filtered",
        "table.include.list": rf"public\.users_{kafka}_.*",
        "snapshot.mode": "initial",
        # Connect creates the topics (one partition, so a key's changes keep their order).
        "topic.creation.default.replication.factor": "1",
        "topic.creation.default.partitions": "1",
        "poll.interval.ms": "100",
    }
    if bootstrap != worker.bootstrap:
        # This connector's records, and the topics it creates, go to another cluster.
        config["producer.override.bootstrap.servers"] = bootstrap
        config["admin.override.bootstrap.servers"] = bootstrap
    return config


def _events(conn: Any, statements: list[str]) -> int:
    """Run `statements` in one transaction; the change events Debezium makes of them: one
    per row changed, and a tombstone after each deleted row."""
    events = 0
    with conn.transaction():
        for sql in statements:
            rowcount = conn.execute(sql).rowcount
            events += rowcount * (2 if sql.lstrip().upper().startswith("DELETE") else 1)
    return events


def _end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-ends"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    except KafkaException:  # the topic is not there yet: nothing captured
        return 0
    finally:
        consumer.close()


def wait_captured(capture: Capture, kafka: str, engine: str, timeout: float = 90) -> None:
    topic, want = Capture.topic(kafka, engine), capture.records[Capture.table(kafka, engine)]
    deadline = time.monotonic() + timeout
    got = 0
    while time.monotonic() < deadline:
        got = _end_offset(capture.bootstraps[kafka], topic)
        if got >= want:
            assert got == want, f"{topic}: {got} records, {want} change events expected"
            return
        time.sleep(0.3)
    raise AssertionError(
        f"{topic}: {got} of {want} change events after {timeout:.0f}s; worker log:\n"
        f"{capture.worker.tail()}"
    )


@pytest.fixture(scope="module")
def capture(
    postgres: Postgres, broker: Any, apache_kafka: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Capture]:
    """The database with its tables and their initial rows, and the worker with both
    connectors RUNNING; each case's initial snapshot is in its topic."""
    records = {}
    with postgres.connect() as conn:
        for kafka in BROKERS:
            for engine in ENGINES:
                table = Capture.table(kafka, engine)
                conn.execute(f"CREATE TABLE {table} ({COLUMNS})")
                with conn.cursor() as cur:
                    cur.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s, %s)", INITIAL)
                records[table] = len(INITIAL)
    bootstraps = {"bundled": broker.bootstrap, "apache": apache_kafka.bootstrap}
    worker = started(tmp_path_factory.mktemp("debezium-worker"), broker.bootstrap)
    try:
        for kafka in BROKERS:
            worker.put_connector(
                f"postgres-{kafka}", _connector(postgres, kafka, bootstraps[kafka], worker)
            )
        for kafka in BROKERS:
            worker.wait_running(f"postgres-{kafka}")
        yield Capture(postgres, worker, bootstraps, records)
    finally:
        worker.stop()


def _project(root: Path, bootstrap: str, topic: str, engine: str) -> Project:
    ods = start_project(root, bootstrap, "ods", delta=engine, kafka=engine)
    # Batches of at most 16 records: the first run's first batch ends before offset 16,
    # inside the transaction that changes row 1 three times (offsets 14, 15 and 16 after
    # the snapshot's 8 records and 6 events before it), so changes of one row with one
    # commit time are in different batches, as a smaller or later batch would put them.
    source = (
        f"{{kafka: {{topic: {topic}, format: debezium-json, connect_schema: true, "
        f"max_offsets_per_trigger: {BATCH}}}}}"
    )
    for name, mode in (("users_scd1", "upsert"), ("users_scd2", "scd2")):
        (ods / f"{name}.yml").write_text(
            f"table: {name}\nsource: {source}\n"
            f"sink: {{mode: {mode}, keys: [id], sequence_by: _source_lsn}}\n"
        )
    return Project.load(root)


def _delta_rows(path: str, columns: list[str], *, current_only: bool = False) -> list[tuple]:
    rows = read_table(path, columns=[*columns, *(["is_current"] if current_only else [])])
    return sorted(
        (
            tuple(r[c] for c in columns)
            for r in rows.to_pylist()
            if not current_only or r["is_current"]
        ),
        key=repr,
    )


def _assert_tables_equal_the_database(project: Project, capture: Capture, table: str) -> None:
    columns = capture.postgres.columns(table)
    expected = capture.postgres.rows(f"SELECT * FROM {table}")
    assert _delta_rows(project.table_path("users_scd1"), columns) == expected
    assert _delta_rows(project.table_path("users_scd2"), columns, current_only=True) == expected


@pytest.mark.parametrize("kafka", BROKERS)
def test_postgres_changes_through_debezium_land_as_the_database_holds_them(
    spark, capture: Capture, kafka: str, engine: str, tmp_path: Path
) -> None:
    table, topic = Capture.table(kafka, engine), Capture.topic(kafka, engine)
    wait_captured(capture, kafka, engine)  # the initial snapshot
    project = _project(tmp_path / "proj", capture.bootstraps[kafka], topic, engine)
    pipeline = Pipeline(project, spark, layer="ods")

    read = 0
    for round_ in (ROUND_1, ROUND_2):
        with capture.postgres.connect() as conn:
            for statements in round_:
                capture.records[table] += _events(conn, [s.format(t=table) for s in statements])
        wait_captured(capture, kafka, engine)
        results = pipeline.run(once=True)
        new = capture.records[table] - read
        read = capture.records[table]
        assert [(r.rows_read, r.batches, r.quarantined) for r in results] == [
            (new, -(-new // BATCH), 0)
        ] * 2
        _assert_tables_equal_the_database(project, capture, table)
