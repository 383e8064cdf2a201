"""The row columns of a Debezium record's Kafka Connect schema (no broker, no session)."""

from __future__ import annotations

import json

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from streams.kafka import KafkaConfigError
from streams.kafka.parse_connect import connect_struct

ROW = {
    "type": "struct",
    "name": "shop.public.users.Value",
    "optional": True,
    "fields": [
        {"field": "user_id", "type": "int64", "optional": False},
        {"field": "name", "type": "string", "optional": True},
        {"field": "signup", "type": "int32", "optional": True, "name": "io.debezium.time.Date"},
        # JsonConverter's names for Connect's FLOAT64 and FLOAT32 (Debezium: a Postgres
        # `double precision` and `real`)
        {"field": "score", "type": "double"},
        {"field": "ratio", "type": "float", "optional": True},
        {"field": "tags", "type": "array", "items": {"type": "string"}, "optional": True},
        {"field": "photo", "type": "bytes", "optional": True},
    ],
}
ENVELOPE = {
    "type": "struct",
    "name": "shop.public.users.Envelope",
    "fields": [
        {**ROW, "field": "before"},
        {**ROW, "field": "after"},
        {"field": "source", "type": "struct", "fields": [{"field": "ts_ms", "type": "int64"}]},
        {"field": "op", "type": "string", "optional": False},
        {"field": "ts_ms", "type": "int64", "optional": True},
    ],
}


def test_the_row_image_of_the_envelope_schema_with_not_optional_fields_not_null() -> None:
    value = json.dumps({"schema": ENVELOPE, "payload": {"op": "c", "after": {"user_id": 1}}})
    assert connect_struct(value.encode()) == StructType(
        [
            StructField("user_id", LongType(), False),
            StructField("name", StringType(), True),
            StructField("signup", IntegerType(), True),
            StructField("score", DoubleType(), True),
            StructField("ratio", FloatType(), True),
            StructField("tags", ArrayType(StringType(), True), True),
            StructField("photo", BinaryType(), True),
        ]
    )


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ('{"before": null, "after": {"id": 1}, "op": "c"}', "has no Connect schema"),
        ("not json", "is not JSON"),
        (json.dumps({"schema": {"type": "struct", "fields": []}, "payload": {}}), "no `after`"),
        (
            json.dumps(
                {"schema": {"type": "struct", "fields": [{"field": "after", "type": "uuid"}]}}
            ),
            "`uuid` is not supported",
        ),
    ],
)
def test_a_record_without_a_usable_schema_says_what_it_lacks(value: str, words: str) -> None:
    with pytest.raises(KafkaConfigError, match=words):
        connect_struct(value)


def test_an_upsert_record_s_columns_are_its_value_s_own_struct() -> None:
    value = json.dumps({"schema": ROW, "payload": {"user_id": 1}})
    struct = connect_struct(value, format="upsert-json")
    assert struct.fieldNames() == ["user_id", "name", "signup", "score", "ratio", "tags", "photo"]
    assert [f.nullable for f in struct.fields] == [False, True, True, True, True, True, True]
    # A value without a payload (a delete) still carries the row's schema.
    assert connect_struct(json.dumps({"schema": ROW, "payload": None}), format="upsert-json") == (
        struct
    )


@pytest.mark.parametrize(
    ("value", "fmt", "words"),
    [
        (
            json.dumps({"schema": {"type": "string"}, "payload": "x"}),
            "upsert-json",
            "`string`, not a struct",
        ),
        ('{"user_id": 1}', "upsert-json", "has no Connect schema"),
        (json.dumps({"schema": ROW, "payload": {}}), "json", "Format `json` does not take"),
    ],
)
def test_an_upsert_record_without_a_row_schema_says_what_it_lacks(
    value: str, fmt: str, words: str
) -> None:
    with pytest.raises(KafkaConfigError, match=words):
        connect_struct(value, format=fmt)  # type: ignore[arg-type]
