"""Parse Kafka records in Spark expressions into good rows and explained bad rows.

No Python runs per record: `from_json` (PERMISSIVE, with a corrupt-record column)
types the payload, and only rows it flags are explained, lazily inside a `CASE`,
from a VARIANT parse of the same text (`try_parse_json`, `schema_of_variant`), so a
clean batch pays for one JSON parse.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Sequence
from typing import Literal

from pyspark.sql import DataFrame, Observation
from pyspark.sql.types import DataType, StructType

from streams.kafka.columns import KAFKA_COLUMNS
from streams.kafka.errors import KafkaConfigError
from streams.kafka.parse_formats import (
    _debezium_exprs,
    _json_exprs,
    _parse_raw,
    _upsert_connect_exprs,
    _upsert_exprs,
)
from streams.kafka.parse_frames import ParsedFrames, Persist, _Exprs, _split, _Stage

logger = logging.getLogger(__name__)

Format = Literal["json", "raw", "debezium-json", "upsert-json"]
FORMATS: tuple[str, ...] = ("json", "raw", "debezium-json", "upsert-json")
CONNECT_FORMATS: tuple[str, ...] = ("debezium-json", "upsert-json")
"""The formats whose records may come in Kafka Connect envelopes (`connect=True`)."""


@functools.lru_cache(maxsize=64)
def _from_ddl(ddl: str) -> DataType:
    """Spark's parse of `ddl` (a JVM call; the result is a plain Python type, kept)."""
    return DataType.fromDDL(ddl)


def as_struct(schema: StructType | str | None, fmt: str) -> StructType:
    """`schema` (a StructType or DDL) as a StructType; a clear error for format `fmt`."""
    if schema is None:
        raise KafkaConfigError(
            f"Format `{fmt}` needs a schema (a StructType or a DDL string such as "
            "`order_id bigint, amount double`).",
            option="schema",
        )
    if isinstance(schema, StructType):
        return schema
    try:
        parsed = _from_ddl(schema)
    except Exception as e:  # Spark raises its own parse exception types
        raise KafkaConfigError(
            f"Schema `{schema}` is not valid Spark DDL: {e}.", option="schema"
        ) from e
    if not isinstance(parsed, StructType):
        raise KafkaConfigError(
            f"Schema `{schema}` must describe a struct of fields, got `{parsed.simpleString()}`.",
            option="schema",
        )
    return parsed


def _check_required(
    schema: StructType, required: Sequence[str], *, option: str = "required"
) -> None:
    unknown = [r for r in required if r not in schema.fieldNames()]
    if unknown:
        what = "Required field" if option == "required" else "Key column"
        raise KafkaConfigError(
            f"{what} `{unknown[0]}` is not in the schema ({', '.join(f'`{n}`' for n in schema.fieldNames())}). "
            f"Add it to the schema or drop it from `{option}`.",
            option=option,
        )


def parse_kafka(
    df: DataFrame,
    *,
    format: Format,
    schema: StructType | str | None = None,
    connect: bool = False,
    required: Sequence[str] = (),
    keys: Sequence[str] = (),
    persist: Persist | None = None,
    observe: Observation | None = None,
) -> ParsedFrames:
    """Split Kafka records (`key, value, topic, partition, offset, timestamp`) into typed
    `good` rows and `bad` rows with an `_error` reason. `required` names fields that must
    be present and non-null, as does every field `schema` declares `NOT NULL`; a record
    without one is bad with "missing required field `name`" (a Debezium delete's
    `before` image excepted: it may hold only the key columns). The good rows' columns
    are nullable either way. Works on batch and streaming frames.

    `keys` names the columns a sink places rows by (an upsert's or SCD2's keys): a
    record whose good row would have one null (a tombstone whose key lacks it, a
    Debezium delete whose `before` image does) is bad with "key column `name` is
    null", so that one record is set aside instead of failing the sink's batch.

    `connect=True`: the records are as Kafka Connect's JsonConverter writes them with
    `schemas.enable=true`. For `upsert-json`, each value is `{"schema": ..., "payload":
    row}`, a null value or `payload` a delete, the key an envelope too or plain JSON; a
    value that is not an envelope is bad ("not a Kafka Connect envelope ..."). For
    `debezium-json` it changes nothing: that parse reads a `payload` wrapper either way.

    `persist` (batch frames): called once with the parsed and flagged frame both
    results derive from; returning it persisted lets `good` and `bad` share one read
    and one parse of the records instead of two.

    `observe`: an unused `Observation` that collects `records` (every record of `df`)
    and `flagged` (how many go to `bad`) during the first action over `good` or `bad`;
    it lets a caller write `good` in one pass and read `bad` only when it is not empty.
    Without `persist` it also collects `flagged_at`, the `record_hash`es of the records
    bound for `bad` (`hashes_of`; null beyond `SUSPECTS_CAP`), so that the second pass
    parses only those records again."""
    missing = [c for c in KAFKA_COLUMNS if c not in df.columns]
    if missing:
        raise KafkaConfigError(
            f"parse_kafka needs the Kafka columns; `{missing[0]}` is missing from "
            f"({', '.join(df.columns)}). Pass the frame from read_kafka_stream.",
            option="df",
        )

    def reparse(frame: DataFrame) -> ParsedFrames:
        return parse_kafka(
            frame, format=format, schema=schema, connect=connect, required=required, keys=keys
        )

    stage = _Stage(persist, reparse, observe)
    if format == "raw":
        if keys:
            raise KafkaConfigError(
                "Format `raw` has no payload columns to hold `keys` "
                f"({', '.join(f'`{k}`' for k in keys)}); drop `keys` or parse the records.",
                option="keys",
            )
        return _parse_raw(df, stage)
    if format not in FORMATS:
        raise KafkaConfigError(
            f"Unknown Kafka format `{format}`; expected one of {', '.join(f'`{x}`' for x in FORMATS)}.",
            option="format",
        )
    if connect and format not in CONNECT_FORMATS:
        raise KafkaConfigError(
            f"`connect=True` applies to {', '.join(f'`{x}`' for x in CONNECT_FORMATS)}, "
            f"not to format `{format}`; drop `connect` or use one of those formats.",
            option="connect",
        )
    struct = as_struct(schema, format)
    _check_required(struct, required)
    _check_required(struct, keys, option="keys")
    fields = required_fields(struct, required)
    jvm = getattr(df.sparkSession, "_jvm", None)  # None under Spark Connect
    builder = "upsert-connect-json" if connect and format == "upsert-json" else format
    exprs = _exprs(jvm, builder, struct.json(), fields, tuple(dict.fromkeys(keys)))
    return _split(df, exprs, stage)


def required_fields(schema: StructType, required: Sequence[str] = ()) -> tuple[str, ...]:
    """The fields a record must have, non-null: `required`, then every field `schema`
    declares not nullable (`NOT NULL` in DDL; a JSON Schema's `required` property, as
    the project loader writes it). One rule for every parse path, Spark's and Arrow's."""
    names = [*required, *(f.name for f in schema.fields if not f.nullable)]
    return tuple(dict.fromkeys(names))


_BUILDERS: dict[str, Callable[[StructType, Sequence[str], Sequence[str]], _Exprs]] = {
    "json": _json_exprs,
    "debezium-json": _debezium_exprs,
    "upsert-json": _upsert_exprs,
    "upsert-connect-json": _upsert_connect_exprs,  # `upsert-json` with `connect=True`
}


@functools.lru_cache(maxsize=64)
def _exprs(
    jvm: object,
    format: str,
    schema_json: str,
    required: tuple[str, ...],
    keys: tuple[str, ...],
) -> _Exprs:
    """The expressions of one parse, per JVM (`jvm` keeps a cached set from outliving the
    gateway its Columns live in)."""
    schema = StructType.fromJson(json.loads(schema_json))
    return _BUILDERS[format](schema, required, keys)
