"""The row columns of records that carry their Kafka Connect schema.

Kafka Connect's JsonConverter with `schemas.enable=true` (Debezium's default) writes
each value as `{"schema": {...}, "payload": {...}}`. For a Debezium change event the
schema describes the envelope, whose `after` and `before` fields are the row image;
for an upsert record (`upsert-json`) it describes the row itself. `connect_struct`
turns that into the `StructType` `parse_kafka` takes; `sample_connect_struct` reads
it from the newest records of the topic, so a table can be declared without a schema
file. A field the Connect schema marks not optional is `NOT NULL`, which
`parse_kafka` enforces as required.

Types are the JSON wire types (Connect's logical types keep their encoding: a
`io.debezium.time.Date` is the int32 day count, a `Decimal` its base64 bytes).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from streams.kafka.admin import end_offsets
from streams.kafka.errors import KafkaConfigError
from streams.kafka.fetch import RECORD_SCHEMA, consumer_config, read_range
from streams.kafka.offsets import OffsetRange

# The type names JsonConverter writes (Kafka's JsonSchema: FLOAT32 is `float`, FLOAT64 is
# `double`), not Connect's `Schema.Type` names.
_PRIMITIVES: dict[str, DataType] = {
    "int8": ByteType(),
    "int16": ShortType(),
    "int32": IntegerType(),
    "int64": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "boolean": BooleanType(),
    "string": StringType(),
    "bytes": BinaryType(),
}
ConnectFormat = Literal["debezium-json", "upsert-json"]
"""The formats whose columns a record's Connect schema can give."""
_TAIL = 100
"""Records read from the end of each partition to find one with a value."""


def _type(schema: Any, where: str) -> DataType:
    if not isinstance(schema, Mapping) or not isinstance(schema.get("type"), str):
        raise KafkaConfigError(f"{where}: not a Connect schema (no `type`)", option="schema")
    kind = schema["type"]
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "struct":
        return _struct(schema, where)
    if kind == "array":
        return ArrayType(_type(schema.get("items"), f"{where} items"), True)
    if kind == "map":
        return MapType(
            _type(schema.get("keys"), f"{where} keys"),
            _type(schema.get("values"), f"{where} values"),
            True,
        )
    raise KafkaConfigError(f"{where}: Connect type `{kind}` is not supported", option="schema")


def _struct(schema: Mapping[str, Any], where: str) -> StructType:
    fields = schema.get("fields")
    if not isinstance(fields, list):
        raise KafkaConfigError(f"{where}: a Connect struct without `fields`", option="schema")
    out = []
    for f in fields:
        name = f.get("field") if isinstance(f, Mapping) else None
        if not isinstance(name, str):
            raise KafkaConfigError(f"{where}: a field without a name", option="schema")
        out.append(StructField(name, _type(f, f"{where}.{name}"), bool(f.get("optional", True))))
    return StructType(out)


def connect_struct(value: bytes | str, *, format: ConnectFormat = "debezium-json") -> StructType:
    """The row columns of one record written with its Connect schema: the `after` (or
    `before`) struct of a Debezium envelope (`debezium-json`), the value's own struct
    (`upsert-json`); `KafkaConfigError` saying what the record lacks when it has none."""
    if format not in ("debezium-json", "upsert-json"):
        raise KafkaConfigError(
            f"Format `{format}` does not take its columns from a Connect schema; expected "
            "`debezium-json` or `upsert-json`.",
            option="format",
        )
    try:
        doc = json.loads(value)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise KafkaConfigError(f"the record is not JSON ({e})", option="schema") from e
    if not isinstance(doc, Mapping) or not isinstance(doc.get("schema"), Mapping):
        raise KafkaConfigError(
            'the record has no Connect schema: expected `{"schema": ..., "payload": ...}` '
            "(Kafka Connect's JsonConverter with `schemas.enable=true`)",
            option="schema",
        )
    envelope = _type(doc["schema"], "schema")
    if format == "upsert-json":
        if not isinstance(envelope, StructType):
            raise KafkaConfigError(
                f"the record's Connect schema is `{doc['schema']['type']}`, not a struct of "
                "columns: format `upsert-json` needs each value to be a row",
                option="schema",
            )
        return envelope
    images = {
        f.name: f.dataType
        for f in getattr(envelope, "fields", [])
        if f.name in ("after", "before") and isinstance(f.dataType, StructType)
    }
    image = images.get("after") or images.get("before")
    if image is None:
        raise KafkaConfigError(
            "the record's Connect schema has no `after` or `before` struct: it is not a "
            "Debezium change event",
            option="schema",
        )
    return image


def sample_connect_struct(
    bootstrap: str,
    topics: Iterable[str],
    *,
    client_config: Mapping[str, Any] | None = None,
    format: ConnectFormat = "debezium-json",
) -> StructType:
    """`connect_struct` (for `format`) of the newest record with a value in `topics`
    (its last `_TAIL` records per partition are read); `KafkaConfigError` when there is
    none."""
    names = list(topics)
    ends = end_offsets(bootstrap, names, client_config=client_config, read_committed=True)
    conf = consumer_config(
        bootstrap, dict(client_config or {}), isolation_level="read_committed", size=_TAIL
    )
    newest: tuple[float, bytes] | None = None
    for topic, parts in ends.items():
        for partition, end in parts.items():
            if end == 0:
                continue
            rng = OffsetRange(topic, partition, max(0, end - _TAIL), end)
            for batch in read_range(rng, conf, RECORD_SCHEMA, on_data_loss="skip"):
                for value, ts in zip(
                    batch.column("value").to_pylist(),
                    batch.column("timestamp").to_pylist(),
                    strict=True,
                ):
                    at = ts.timestamp() if ts is not None else 0.0
                    if value is not None and (newest is None or at >= newest[0]):
                        newest = (at, value)
    if newest is None:
        raise KafkaConfigError(
            f"{', '.join(f'`{t}`' for t in names)} has no record with a value yet, so the "
            "columns cannot be read from a record's Connect schema",
            option="schema",
        )
    return connect_struct(newest[1], format=format)
