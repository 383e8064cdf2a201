"""Payload schemas without Spark: JSON Schema and DDL to columns, and back to DDL."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warehouse.spec.schemas import (
    Column,
    Columns,
    SchemaFileError,
    ddl_columns,
    json_schema_columns,
    kafka_columns,
    sink_columns,
    table_source_columns,
    to_ddl,
)


def test_json_schema_types_formats_and_required() -> None:
    cols = json_schema_columns(
        {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "n": {"type": "integer"},
                "x": {"type": "number"},
                "ok": {"type": "boolean"},
                "at": {"type": "string", "format": "date-time"},
                "day": {"type": "string", "format": "date"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "addr": {"type": "object", "properties": {"city": {"type": "string"}}},
                "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
                "maybe": {"type": ["integer", "null"]},
                "price": {"type": "number", "x-spark-type": "DECIMAL(12, 2)"},
            },
            "required": ["id", "maybe"],
        }
    )
    assert [(c.name, c.type, c.nullable) for c in cols] == [
        ("id", "string", False),
        ("n", "bigint", True),
        ("x", "double", True),
        ("ok", "boolean", True),
        ("at", "timestamp", True),
        ("day", "date", True),
        ("tags", "array<string>", True),
        ("addr", "struct<city: string>", True),
        ("attrs", "map<string, bigint>", True),
        ("maybe", "bigint", True),  # required, but may be null
        ("price", "decimal(12,2)", True),
    ]


@pytest.mark.parametrize(
    ("document", "field", "words"),
    [
        ([1, 2], "", "must be an object"),
        ({"type": "array"}, "type", "`array`"),
        ({"type": "object"}, "properties", "needs `properties`"),
        ({"properties": {"a": {"type": "strin"}}}, "properties.a.type", "`strin`"),
        ({"properties": {"a": {"type": "array"}}}, "properties.a", "needs `items`"),
        ({"properties": {"a": {"type": ["string", "integer"]}}}, "properties.a.type", "ambiguous"),
        ({"properties": {"a": {"type": "string"}}, "required": "a"}, "required", "list"),
    ],
)
def test_invalid_json_schemas_say_where(document: object, field: str, words: str) -> None:
    with pytest.raises(SchemaFileError) as info:
        json_schema_columns(document)
    assert info.value.field == field
    assert words in info.value.message


def test_ddl_is_parsed_with_nested_types_comments_and_not_null() -> None:
    cols = ddl_columns(
        "id BIGINT NOT NULL, `odd name` STRING COMMENT 'has, a comma', "
        "amount DECIMAL(12, 2), m MAP<STRING, ARRAY<INT>>, s STRUCT<a: INT, b: STRING>, "
        "n INTEGER, l LONG;"
    )
    assert [(c.name, c.type, c.nullable) for c in cols] == [
        ("id", "bigint", False),
        ("odd name", "string", True),
        ("amount", "decimal(12,2)", True),
        ("m", "map<string, array<int>>", True),
        ("s", "struct<a: int, b: string>", True),
        ("n", "int", True),
        ("l", "bigint", True),
    ]


@pytest.mark.parametrize(
    ("ddl", "words"),
    [
        ("", "no columns"),
        ("a", "has no type"),
        ("a STRNG", "`STRNG` is not a Spark type"),
        ("a DECIMAL(x)", "bad arguments"),
        ("a ARRAY", "needs its element types"),
        ("a MAP<STRING>", "map<key type, value type>"),
    ],
)
def test_bad_ddl_is_rejected(ddl: str, words: str) -> None:
    with pytest.raises(SchemaFileError) as info:
        ddl_columns(ddl)
    assert words in info.value.message


_NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
_SCALARS = st.sampled_from(
    [
        "string",
        "int",
        "bigint",
        "double",
        "boolean",
        "date",
        "timestamp",
        "binary",
        "decimal(10,2)",
        "smallint",
    ]
)
_TYPES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        inner.map(lambda t: f"array<{t}>"),
        st.tuples(_SCALARS, inner).map(lambda kv: f"map<{kv[0]}, {kv[1]}>"),
        st.lists(st.tuples(_NAMES, inner), min_size=1, max_size=3, unique_by=lambda f: f[0]).map(
            lambda fs: "struct<" + ", ".join(f"{n}: {t}" for n, t in fs) + ">"
        ),
    ),
    max_leaves=6,
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(_NAMES, _TYPES, st.booleans()), min_size=1, max_size=6, unique_by=lambda c: c[0]
    )
)
def test_columns_to_ddl_and_back_round_trip(spec: list[tuple[str, str, bool]]) -> None:
    cols = Columns(Column(n, t, nullable) for n, t, nullable in spec)
    assert list(ddl_columns(to_ddl(cols, not_null=True))) == list(cols)


def test_framework_columns_per_source_and_sink() -> None:
    payload = Columns([Column("id", "string", False)])
    assert kafka_columns("json", payload).names == [
        "id",
        "_topic",
        "_partition",
        "_offset",
        "_timestamp",
    ]
    assert kafka_columns("upsert-json", payload).names[:2] == ["id", "_deleted"]
    assert kafka_columns("debezium-json", None).opaque
    changes = table_source_columns(payload, "changes")
    assert changes.names == ["id", "_change_type", "_commit_version", "_commit_timestamp"]
    cdc = Columns([Column("id", "string"), Column("_op", "string"), Column("_deleted", "boolean")])
    assert sink_columns(cdc, "upsert").names == ["id"]
    assert sink_columns(cdc, "append").names == ["id", "_op", "_deleted"]
    assert sink_columns(cdc, "scd2").names == ["id", "valid_from", "valid_to", "is_current"]


def test_json_schema_refs_optional_unions_enums_and_int_formats() -> None:
    # the shapes pydantic's `model_json_schema()` writes
    cols = json_schema_columns(
        {
            "type": "object",
            "$defs": {
                "Address": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "zip-code": {"type": "string"}},
                }
            },
            "properties": {
                "at": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]},
                "home": {"$ref": "#/$defs/Address"},
                "work": {"oneOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]},
                "status": {"enum": ["new", "paid"]},
                "n": {"type": "integer", "format": "int32"},
                "x": {"type": "number", "format": "float"},
            },
            "required": ["at", "status", "home"],
        }
    )
    address = "struct<city: string, `zip-code`: string>"
    assert [(c.name, c.type, c.nullable) for c in cols] == [
        ("at", "timestamp", True),
        ("home", address, False),
        ("work", address, True),
        ("status", "string", False),
        ("n", "int", True),
        ("x", "float", True),
    ]
    assert list(ddl_columns(cols.to_ddl(not_null=True))) == list(cols)


@pytest.mark.parametrize(
    ("prop", "field", "words"),
    [
        ({"$ref": "#/$defs/Nope"}, "properties.a.$ref", "points nowhere"),
        ({"$ref": "other.json#/x"}, "properties.a", "not local"),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, "properties.a.anyOf", "ambiguous"),
    ],
)
def test_unsupported_json_schema_constructs_say_where(prop: dict, field: str, words: str) -> None:
    with pytest.raises(SchemaFileError) as info:
        json_schema_columns({"type": "object", "properties": {"a": prop}})
    assert info.value.field == field and words in info.value.message
