"""A Debezium table without a schema file: `connect_schema: true` takes the columns from
the Kafka Connect schema its records carry (`{"schema": ..., "payload": ...}`), read from
the topic when the query starts. Real broker, real Spark, real Delta."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.delta.arrow import read_table
from streams.kafka.admin import ensure_topic, produce
from warehouse import Project
from warehouse.compile import CompileError
from warehouse.runtime.pipeline import Pipeline

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

ROW = {
    "type": "struct",
    "optional": True,
    "name": "shop.public.users.Value",
    "fields": [
        {"field": "user_id", "type": "int64", "optional": False},
        {"field": "name", "type": "string", "optional": True},
        {"field": "visits", "type": "int32", "optional": True},
    ],
}
ENVELOPE = {
    "type": "struct",
    "name": "shop.public.users.Envelope",
    "optional": False,
    "fields": [
        {**ROW, "field": "before"},
        {**ROW, "field": "after"},
        {
            "field": "source",
            "type": "struct",
            "optional": False,
            "fields": [{"field": "ts_ms", "type": "int64", "optional": False}],
        },
        {"field": "op", "type": "string", "optional": False},
        {"field": "ts_ms", "type": "int64", "optional": True},
    ],
}


def change(op: str, before: dict | None, after: dict | None, ts: int) -> str:
    payload = {"before": before, "after": after, "op": op, "source": {"ts_ms": ts}, "ts_ms": ts}
    return json.dumps({"schema": ENVELOPE, "payload": payload})


def _project(root: Path, bootstrap: str, topic: str) -> Project:
    (root / "conf").mkdir(parents=True)
    dwd = root / "layers" / "dwd"
    dwd.mkdir(parents=True)
    (root / "conf" / "local.yml").write_text(
        f"warehouse_root: {root / '.warehouse'}\n"
        f'kafka:\n  bootstrap: "{bootstrap}"\n'
        "engines: {kafka: python, delta: python}\n"
        'spark:\n  master: "local[2]"\n  conf:\n    spark.sql.shuffle.partitions: "2"\n'
    )
    (dwd / "users.yml").write_text(
        "table: dim_users\n"
        f"source: {{kafka: {{topic: {topic}, format: debezium-json, connect_schema: true}}}}\n"
        "sink: {mode: upsert, keys: [user_id], sequence_by: _source_ts_ms}\n"
    )
    return Project.load(root)


def rows(path: Path, columns: list[str]) -> list[tuple]:
    table = read_table(str(path), columns=columns)
    return sorted((tuple(r[c] for c in columns) for r in table.to_pylist()), key=repr)


def test_columns_come_from_the_records_connect_schema(
    spark, broker, unique, tmp_path: Path
) -> None:
    topic = unique("connect")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    produce(
        broker.bootstrap,
        topic,
        [
            ("1", change("c", None, {"user_id": 1, "name": "Ann", "visits": 1}, 100)),
            ("2", change("c", None, {"user_id": 2, "name": "Bob", "visits": 5}, 110)),
            ("1", change("u", {"user_id": 1}, {"user_id": 1, "name": "Ann", "visits": 2}, 120)),
            ("3", change("c", None, {"user_id": 3, "name": "Cy", "visits": 0}, 130)),
            ("3", change("d", {"user_id": 3}, None, 140)),
            ("3", None),  # the tombstone after a delete
            # `user_id` is not optional in the Connect schema: required.
            ("4", change("c", None, {"name": "no id", "visits": 9}, 150)),
        ],
    )
    project = _project(tmp_path / "proj", broker.bootstrap, topic)
    assert project.tables["dim_users"].payload_ddl is None  # known only from the records

    (result,) = Pipeline(project, spark, layer="dwd").run(once=True)

    assert (result.rows_read, result.quarantined) == (7, 1)
    assert rows(project.table_path("dim_users"), ["user_id", "name", "visits"]) == [
        (1, "Ann", 2),
        (2, "Bob", 5),
    ]
    assert rows(project.quarantine_path("dim_users"), ["source_offset", "reason"]) == [
        (6, "parse error: missing required field `user_id`"),
    ]


def test_an_empty_topic_fails_the_start_naming_the_table(
    spark, broker, unique, tmp_path: Path
) -> None:
    topic = unique("connect-empty")
    ensure_topic(broker.bootstrap, topic, partitions=2)
    project = _project(tmp_path / "proj", broker.bootstrap, topic)
    with pytest.raises(CompileError) as info:
        Pipeline(project, spark, layer="dwd").run(once=True)
    message = str(info.value)
    assert "Table `dim_users` (layers/dwd/users.yml)" in message
    assert f"`{topic}` has no record with a value yet" in message
    assert "`schema: NAME`" in message
    assert not project.table_path("dim_users").exists()


def test_records_without_their_schema_fail_the_start_naming_the_table(
    spark, broker, unique, tmp_path: Path
) -> None:
    topic = unique("connect-plain")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    plain = json.loads(change("c", None, {"user_id": 1}, 1))["payload"]
    produce(broker.bootstrap, topic, [("1", json.dumps(plain))])
    project = _project(tmp_path / "proj", broker.bootstrap, topic)
    with pytest.raises(CompileError, match=r"Table `dim_users`.*has no Connect schema"):
        Pipeline(project, spark, layer="dwd").run(once=True)
