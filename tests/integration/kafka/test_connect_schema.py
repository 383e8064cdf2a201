"""Debezium and upsert tables without a schema file: `connect_schema: true` takes the
columns from the Kafka Connect schema their records carry (`{"schema": ..., "payload":
...}`), read from the topic when the query starts. Real broker, real Spark, real Delta."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import Row

from streams.kafka import parse_kafka
from streams.kafka.source import SCHEMA
from tests.integration.projects import new_topic, start_project
from tests.integration.projects import table_rows as rows
from tests.support.rows import assert_rows
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


def _project(root: Path, bootstrap: str, topic: str, *, upsert: bool = False) -> Project:
    dwd = start_project(root, bootstrap, "dwd")
    fmt, seq = ("upsert-json", "") if upsert else ("debezium-json", ", sequence_by: _source_ts_ms")
    (dwd / "users.yml").write_text(
        "table: dim_users\n"
        f"source: {{kafka: {{topic: {topic}, format: {fmt}, connect_schema: true}}}}\n"
        f"sink: {{mode: upsert, keys: [user_id]{seq}}}\n"
    )
    return Project.load(root)


def test_columns_come_from_the_records_connect_schema(
    spark, broker, unique, tmp_path: Path
) -> None:
    topic = new_topic(
        broker.bootstrap,
        unique("connect"),
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
    topic = new_topic(broker.bootstrap, unique("connect-empty"), partitions=2)
    project = _project(tmp_path / "proj", broker.bootstrap, topic)
    with pytest.raises(CompileError) as info:
        Pipeline(project, spark, layer="dwd").run(once=True)
    message = str(info.value)
    assert "Table `dim_users` (layers/dwd/users.yml)" in message
    assert f"`{topic}` has no record with a value yet" in message
    assert "`schema: NAME`" in message
    assert not Path(project.table_path("dim_users")).exists()


def test_records_without_their_schema_fail_the_start_naming_the_table(
    spark, broker, unique, tmp_path: Path
) -> None:
    plain = json.loads(change("c", None, {"user_id": 1}, 1))["payload"]
    topic = new_topic(broker.bootstrap, unique("connect-plain"), [("1", json.dumps(plain))])
    project = _project(tmp_path / "proj", broker.bootstrap, topic)
    with pytest.raises(CompileError, match=r"Table `dim_users`.*has no Connect schema"):
        Pipeline(project, spark, layer="dwd").run(once=True)


KEY = {
    "type": "struct",
    "optional": False,
    "name": "shop.public.users.Key",
    "fields": [{"field": "user_id", "type": "int64", "optional": False}],
}


def wrapped(schema: dict, payload: object) -> str:
    """A key or value as Kafka Connect's JsonConverter writes it with schemas enabled."""
    return json.dumps({"schema": schema, "payload": payload})


def key(user_id: int) -> str:
    return wrapped(KEY, {"user_id": user_id})


def test_upsert_columns_come_from_the_value_s_connect_schema(
    spark, broker, unique, tmp_path: Path
) -> None:
    topic = new_topic(
        broker.bootstrap,
        unique("connect-upsert"),
        [
            (key(1), wrapped(ROW, {"user_id": 1, "name": "Ann", "visits": 1})),
            (key(2), wrapped(ROW, {"user_id": 2, "name": "Bob", "visits": 5})),
            (key(1), wrapped(ROW, {"user_id": 1, "name": "Ann", "visits": 2})),
            (key(3), wrapped(ROW, {"user_id": 3, "name": "Cy", "visits": 0})),
            (key(4), wrapped(ROW, {"user_id": 4, "name": "Di", "visits": 7})),
            (key(3), wrapped(ROW, None)),  # a delete: the envelope of a null value
            (key(4), None),  # a delete: a tombstone, the key columns from the key's payload
            ('{"user_id": 5}', '{"user_id": 5, "name": "plain", "visits": 1}'),  # no envelope
            (key(6), wrapped(ROW, {"name": "no id", "visits": 9})),  # `user_id` not optional
            ('{"user_id": 2}', None),  # a plain key on a tombstone is the key columns too
        ],
    )
    project = _project(tmp_path / "proj", broker.bootstrap, topic, upsert=True)
    assert project.tables["dim_users"].payload_ddl is None  # known only from the records

    (result,) = Pipeline(project, spark, layer="dwd").run(once=True)

    assert (result.rows_read, result.quarantined) == (10, 2)
    assert rows(project.table_path("dim_users"), ["user_id", "name", "visits"]) == [
        (1, "Ann", 2),
    ]
    assert rows(project.quarantine_path("dim_users"), ["source_offset", "reason"]) == [
        (
            7,
            'parse error: not a Kafka Connect envelope: expected `{"schema": ..., '
            '"payload": ...}` (JsonConverter with `schemas.enable=true`)',
        ),
        (8, "parse error: missing required field `user_id`"),
    ]


def test_upsert_records_in_envelopes_parse_alike_plain_and_persisted(spark) -> None:
    records = [
        (key(1), wrapped(ROW, {"user_id": 1, "name": "Ann", "visits": 1})),
        (key(2), wrapped(ROW, None)),
        ('{"user_id": 3}', None),
        (wrapped(KEY, None), None),
        (None, None),
        (key(4), wrapped(ROW, {"user_id": "four"})),
        (key(5), wrapped(ROW, 5)),
        ('{"user_id": 6}', '{"schema": "public", "user_id": 6}'),
        ("k", "not json"),
    ]

    def b(x: str | None) -> bytes | None:
        return x.encode() if x is not None else None

    frame = spark.createDataFrame(
        [(b(k), b(v), "t", 0, i, None, 0, None) for i, (k, v) in enumerate(records)], SCHEMA
    )
    schema = "user_id bigint NOT NULL, name string, visits int"
    plain = parse_kafka(frame, format="upsert-json", schema=schema, connect=True)
    kept: list = []
    persisted = parse_kafka(
        frame,
        format="upsert-json",
        connect=True,
        schema=schema,
        persist=lambda f: kept.append(f.persist()) or kept[-1],
    )
    try:
        for parsed in (plain, persisted):
            assert_rows(
                parsed.good.select("user_id", "name", "visits", "_deleted", "_offset"),
                [
                    Row(user_id=1, name="Ann", visits=1, _deleted=False, _offset=0),
                    Row(user_id=2, name=None, visits=None, _deleted=True, _offset=1),
                    Row(user_id=3, name=None, visits=None, _deleted=True, _offset=2),
                ],
            )
            assert_rows(
                parsed.bad.select("_offset", "_error"),
                [
                    Row(
                        _offset=3,
                        _error="tombstone key's `payload` is not a JSON object (got null)",
                    ),
                    Row(_offset=4, _error="tombstone without a key"),
                    Row(_offset=5, _error="field `user_id`: expected bigint, got string"),
                    Row(_offset=6, _error="`payload` is not a JSON object (got bigint)"),
                    Row(
                        _offset=7,
                        _error='not a Kafka Connect envelope: expected `{"schema": ..., '
                        '"payload": ...}` (JsonConverter with `schemas.enable=true`)',
                    ),
                    Row(_offset=8, _error="invalid JSON"),
                ],
            )
    finally:
        for f in kept:
            f.unpersist()
