"""A CDC record whose key columns are null (a tombstone whose key lacks them, a Debezium
delete whose `before` image does) goes to quarantine; the rest of its batch lands.

A `warehouse run` of an upsert table against a real broker, real Spark, real Delta: the
sink places rows by key, so one such record used to fail the whole batch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.cdc.helpers import debezium, user
from tests.integration.projects import new_topic, start_project, table_rows
from warehouse import Project
from warehouse.runtime.pipeline import Pipeline

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

NULL_KEY = "parse error: key column `user_id` is null"


def _project(root: Path, bootstrap: str, source: str, sink: str, *, delta: str) -> Project:
    schemas = {"users.ddl": "user_id bigint, name string, city string\n"}
    dwd = start_project(root, bootstrap, "dwd", delta=delta, schemas=schemas)
    (dwd / "users.yml").write_text(f"table: dim_users\nsource: {source}\nsink: {sink}\n")
    return Project.load(root)


def _value(uid: int | None, name: str, city: str) -> str:
    row = {"name": name, "city": city} if uid is None else user(uid, name, city)
    return json.dumps(row)


# `delta: python` writes the batch in one pass; `native` (Spark Delta) takes the
# general, persisted path: both parse with the sink's keys.
@pytest.mark.parametrize("delta", ["python", "native"])
def test_upsert_json_record_without_its_key_column_is_quarantined(
    spark, broker, unique, tmp_path: Path, delta: str
) -> None:
    topic = new_topic(
        broker.bootstrap,
        unique("upsert-null-key"),
        [
            ('{"user_id": 1}', _value(1, "ann", "paris")),
            ('{"user_id": 2}', _value(2, "bob", "rome")),
            ('{"id": 2}', None),  # a tombstone whose key lacks `user_id`
            ('{"user_id": 3}', _value(None, "no id", "oslo")),  # a value without it
            ('{"user_id": 1}', _value(1, "ann", "lima")),
            ('{"user_id": 4}', _value(4, "di", "kyiv")),
            ('{"user_id": 4}', None),  # a good tombstone: deletes 4
        ],
    )
    project = _project(
        tmp_path / "proj",
        broker.bootstrap,
        f"{{kafka: {{topic: {topic}, format: upsert-json, schema: users}}}}",
        "{mode: upsert, keys: [user_id]}",
        delta=delta,
    )

    (result,) = Pipeline(project, spark, layer="dwd").run(once=True)

    assert (result.rows_read, result.quarantined) == (7, 2)
    assert table_rows(project.table_path("dim_users"), ["user_id", "name", "city"]) == [
        (1, "ann", "lima"),
        (2, "bob", "rome"),
    ]
    assert table_rows(project.quarantine_path("dim_users"), ["source_offset", "reason"]) == [
        (2, NULL_KEY),
        (3, NULL_KEY),
    ]


KEY_SCHEMA = {
    "type": "struct",
    "optional": False,
    "fields": [{"field": "user_id", "type": "int64", "optional": False}],
}
ROW_SCHEMA = {
    "type": "struct",
    "optional": True,
    "fields": [
        {"field": "user_id", "type": "int64", "optional": False},
        {"field": "name", "type": "string", "optional": True},
        {"field": "city", "type": "string", "optional": True},
    ],
}


def _wrapped(schema: dict, payload: object) -> str:
    return json.dumps({"schema": schema, "payload": payload})


def test_connect_tombstone_whose_key_payload_lacks_the_key_is_quarantined(
    spark, broker, unique, tmp_path: Path
) -> None:
    topic = new_topic(
        broker.bootstrap,
        unique("connect-null-key"),
        [
            (_wrapped(KEY_SCHEMA, {"user_id": 1}), _wrapped(ROW_SCHEMA, user(1, "ann", "paris"))),
            (_wrapped(KEY_SCHEMA, {"user_id": 2}), _wrapped(ROW_SCHEMA, user(2, "bob", "rome"))),
            (_wrapped(KEY_SCHEMA, {}), None),  # a tombstone, its key's payload empty
            ('{"id": 2}', _wrapped(ROW_SCHEMA, None)),  # a delete, its plain key without it
            (_wrapped(KEY_SCHEMA, {"user_id": 1}), _wrapped(ROW_SCHEMA, user(1, "ann", "lima"))),
        ],
    )
    project = _project(
        tmp_path / "proj",
        broker.bootstrap,
        f"{{kafka: {{topic: {topic}, format: upsert-json, connect_schema: true}}}}",
        "{mode: upsert, keys: [user_id]}",
        delta="python",
    )

    (result,) = Pipeline(project, spark, layer="dwd").run(once=True)

    assert (result.rows_read, result.quarantined) == (5, 2)
    assert table_rows(project.table_path("dim_users"), ["user_id", "name", "city"]) == [
        (1, "ann", "lima"),
        (2, "bob", "rome"),
    ]
    assert table_rows(project.quarantine_path("dim_users"), ["source_offset", "reason"]) == [
        (2, NULL_KEY),
        (3, NULL_KEY),
    ]


def test_debezium_delete_whose_before_image_lacks_the_key_is_quarantined(
    spark, broker, unique, tmp_path: Path
) -> None:
    topic = new_topic(
        broker.bootstrap,
        unique("debezium-null-key"),
        [
            ('{"user_id": 1}', debezium("c", 100, after=user(1, "ann", "paris"))),
            ('{"user_id": 2}', debezium("c", 110, after=user(2, "bob", "rome"))),
            ('{"user_id": 2}', debezium("d", 120, before={"name": "bob"})),  # no key column
            ('{"user_id": 2}', None),  # its tombstone: dropped, as every Debezium tombstone
            ('{"user_id": 1}', debezium("u", 130, before=user(1), after=user(1, "ann", "lima"))),
        ],
    )
    project = _project(
        tmp_path / "proj",
        broker.bootstrap,
        f"{{kafka: {{topic: {topic}, format: debezium-json, schema: users}}}}",
        "{mode: scd2, keys: [user_id], sequence_by: _source_ts_ms}",
        delta="python",
    )

    (result,) = Pipeline(project, spark, layer="dwd").run(once=True)

    assert result.quarantined == 1
    assert table_rows(project.table_path("dim_users"), ["user_id", "city", "is_current"]) == [
        (1, "lima", True),
        (1, "paris", False),
        (2, "rome", True),
    ]
    assert table_rows(project.quarantine_path("dim_users"), ["source_offset", "reason"]) == [
        (2, NULL_KEY),
    ]
