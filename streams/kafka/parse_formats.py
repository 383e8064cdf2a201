"""The expressions of each Kafka format: `json`, `debezium-json` and `upsert-json` (plain,
or in Kafka Connect envelopes with `connect=True`) type the payload with
`from_json` and explain flagged rows from a VARIANT parse of the same text; `raw`
passes the records through.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from streams.kafka.parse_frames import (
    CLUSTER_COLUMN,
    ParsedFrames,
    _coordinates,
    _Exprs,
    _make_exprs,
    _observed,
    _Stage,
)
from streams.kafka.reasons import INVALID_JSON, NULL_VALUE, missing_required

_CORRUPT = "_corrupt_record"
_DEBEZIUM_OPS = ("c", "u", "d", "r")


def _lit_path(base: str, name: str) -> str:
    escaped = name.replace("\\", "\\\\").replace('"', '\\"')
    return f'{base}["{escaped}"]'


def _field_errors(
    variant: Column, typed: Column, schema: StructType, base: str, required: Sequence[str]
) -> list[Column]:
    """One message per field that is missing (when required) or not of its type."""
    out: list[Column] = []
    for field in schema.fields:
        raw_v = F.call_function("variant_get", variant, F.lit(_lit_path(base, field.name)))
        absent = raw_v.isNull() | F.call_function("is_variant_null", raw_v)
        value = typed.getField(field.name)
        if field.name in required:
            out.append(F.when(absent, F.lit(missing_required(field.name))))
        got = F.lower(F.call_function("schema_of_variant", raw_v))
        out.append(
            F.when(
                ~absent & value.isNull(),
                F.concat(
                    F.lit(f"field `{field.name}`: expected {field.dataType.simpleString()}, got "),
                    got,
                ),
            )
        )
    return out


def _explain(
    text: Column, schema: StructType, typed: Column, required: Sequence[str], *, base: str = "$"
) -> Column:
    variant = F.call_function("try_parse_json", text)
    kind = F.call_function("schema_of_variant", variant)
    detail = F.concat_ws("; ", *_field_errors(variant, typed, schema, base, required))
    return (
        F.when(text.isNull(), F.lit(NULL_VALUE))
        .when(variant.isNull(), F.lit(INVALID_JSON))
        .when(
            ~kind.startswith("OBJECT"),
            F.concat(F.lit("not a JSON object (got "), F.lower(kind), F.lit(")")),
        )
        .when(detail != "", detail)
        .otherwise(F.lit("does not match the schema"))
    )


def _required_missing(typed: Column, required: Sequence[str]) -> Column:
    cond = F.lit(False)
    for name in required:
        cond = cond | typed.getField(name).isNull()
    return cond


def _with_corrupt(schema: StructType) -> StructType:
    return StructType([*schema.fields, StructField(_CORRUPT, StringType(), True)])


def _from_json(text: Column, schema: StructType) -> Column:
    return F.from_json(text, _with_corrupt(schema), {"columnNameOfCorruptRecord": _CORRUPT})


def _json_exprs(schema: StructType, required: Sequence[str], keys: Sequence[str]) -> _Exprs:
    text = F.col("value").cast("string")
    typed = F.col("_parsed")
    flagged = (
        text.isNull() | typed.getField(_CORRUPT).isNotNull() | _required_missing(typed, required)
    )
    cols = [typed.getField(f.name).alias(f.name) for f in schema.fields]
    explain = _explain(text, schema, typed, required)
    return _make_exprs(
        [("_parsed", _from_json(text, schema))],
        [*cols, *_coordinates()],
        flagged,
        explain,
        keys=[(k, typed.getField(k)) for k in keys],
    )


def _parse_raw(df: DataFrame, stage: _Stage) -> ParsedFrames:
    if stage.persist is not None:
        df = stage.persist(df)
    df = _observed(df, stage.observe, F.lit(False))
    cols = [F.col("key"), F.col("value")]
    if "headers" in df.columns:
        cols.append(F.col("headers"))
    coordinates = _coordinates()
    if CLUSTER_COLUMN in df.columns:
        coordinates.append(F.col(CLUSTER_COLUMN).alias("_" + CLUSTER_COLUMN))
    good = df.select(*cols, *coordinates)
    bad = df.where(F.lit(False)).select(
        F.col("key"), F.col("value"), *coordinates, F.lit(None).cast("string").alias("_error")
    )
    return ParsedFrames(good, bad)


def _debezium_envelope(schema: StructType) -> StructType:
    """A Debezium change event's fields: both row images of `schema`, `op`, the source's
    and the event's `ts_ms`, and the source's `lsn` (Postgres: the change's position in
    the write-ahead log; the changes of one transaction share their `ts_ms`, not it)."""
    return StructType.fromJson(
        {
            "type": "struct",
            "fields": [
                {"name": "before", "type": schema.jsonValue(), "nullable": True, "metadata": {}},
                {"name": "after", "type": schema.jsonValue(), "nullable": True, "metadata": {}},
                {"name": "op", "type": "string", "nullable": True, "metadata": {}},
                {
                    "name": "source",
                    "type": {
                        "type": "struct",
                        "fields": [
                            {"name": "ts_ms", "type": "long", "nullable": True, "metadata": {}},
                            {"name": "lsn", "type": "long", "nullable": True, "metadata": {}},
                        ],
                    },
                    "nullable": True,
                    "metadata": {},
                },
                {"name": "ts_ms", "type": "long", "nullable": True, "metadata": {}},
            ],
        }
    )


def _debezium_exprs(schema: StructType, required: Sequence[str], keys: Sequence[str]) -> _Exprs:
    envelope = _debezium_envelope(schema)
    outer = StructType([StructField("payload", envelope, True), *envelope.fields])
    text = F.col("value").cast("string")
    p = F.col("_parsed")
    wrapped = p.getField("payload").isNotNull()
    env = F.when(wrapped, p.getField("payload")).otherwise(
        F.struct(*[p.getField(f.name).alias(f.name) for f in envelope.fields])
    )
    e = F.col("_env")
    op = e.getField("op")
    image = F.when(op == "d", e.getField("before")).otherwise(e.getField("after"))
    img = F.col("_image")
    image_key = F.when(op == "d", F.lit("before")).otherwise(F.lit("after"))
    variant = F.call_function("try_parse_json", text)

    def at(path: str) -> Column:
        return F.call_function("variant_get", variant, F.lit(path))

    # variant_get needs a literal path: pick the image the row was typed from.
    image_variant = (
        F.when(wrapped & (op == "d"), at("$.payload.before"))
        .when(wrapped, at("$.payload.after"))
        .when(op == "d", at("$.before"))
        .otherwise(at("$.after"))
    )
    # A delete's `before` image may carry only the key columns (Postgres' default replica
    # identity): `required` applies to the `after` images alone.
    after_required = _field_errors(image_variant, img, schema, "$", required)
    deleted_required = _field_errors(image_variant, img, schema, "$", ())
    field_errs = F.when(op == "d", F.concat_ws("; ", *deleted_required)).otherwise(
        F.concat_ws("; ", *after_required)
    )
    kind = F.call_function("schema_of_variant", variant)
    explain = (
        F.when(variant.isNull(), F.lit(INVALID_JSON))
        .when(
            ~kind.startswith("OBJECT"),
            F.concat(F.lit("not a JSON object (got "), F.lower(kind), F.lit(")")),
        )
        .when(op.isNull(), F.lit("missing Debezium field `op`"))
        .when(
            ~op.isin(*_DEBEZIUM_OPS), F.concat(F.lit("unsupported Debezium op `"), op, F.lit("`"))
        )
        .when(img.isNull(), F.concat(F.lit("missing row image `"), image_key, F.lit("`")))
        .when(field_errs != "", field_errs)
        .otherwise(F.lit("does not match the schema"))
    )
    flagged = (
        p.getField(_CORRUPT).isNotNull()
        | op.isNull()
        | ~op.isin(*_DEBEZIUM_OPS)
        | img.isNull()
        | ((op != "d") & _required_missing(img, required))
    )
    cols = [img.getField(f.name).alias(f.name) for f in schema.fields]
    source_ts = F.coalesce(e.getField("source").getField("ts_ms"), e.getField("ts_ms"))
    source_lsn = e.getField("source").getField("lsn")
    good_cols = [
        *cols,
        op.alias("_op"),
        source_ts.alias("_source_ts_ms"),
        source_lsn.alias("_source_lsn"),
        *_coordinates(),
    ]
    # Tombstones follow deletes for compaction; they carry no row image.
    staged = [("_parsed", _from_json(text, outer)), ("_env", env), ("_image", image)]
    return _make_exprs(
        staged,
        good_cols,
        flagged,
        explain,
        keep=F.col("value").isNotNull(),
        keys=[(k, img.getField(k)) for k in keys],
    )


def _upsert_exprs(schema: StructType, required: Sequence[str], keys: Sequence[str]) -> _Exprs:
    """`upsert-json`: the value is the row; a null value is a delete whose key columns
    come from the key."""
    text = F.col("value").cast("string")
    key_text = F.col("key").cast("string")
    v, k = F.col("_parsed"), F.col("_kparsed")
    deleted = F.col("value").isNull()
    value_flag = v.getField(_CORRUPT).isNotNull() | _required_missing(v, required)
    flagged = F.when(deleted, _key_bad(k).isNotNull()).otherwise(value_flag)
    explain = F.when(deleted, _key_bad(k)).otherwise(_explain(text, schema, v, required))
    staged = [("_parsed", _from_json(text, schema)), ("_kparsed", _from_json(key_text, schema))]
    good = _upsert_good(schema, v, k, deleted)
    return _make_exprs(staged, good, flagged, explain, keys=_upsert_keys(v, k, deleted, keys))


def _key_bad(k: Column) -> Column:
    """Why a tombstone's key (typed as `k`) gives no key columns; null when it does."""
    key_kind = F.call_function(
        "schema_of_variant", F.call_function("try_parse_json", F.col("key").cast("string"))
    )
    return (
        F.when(F.col("key").isNull(), F.lit("tombstone without a key"))
        .when(
            key_kind.isNull() | ~key_kind.startswith("OBJECT"),
            F.lit("tombstone key is not a JSON object"),
        )
        .when(k.getField(_CORRUPT).isNotNull(), F.lit("tombstone key does not match the schema"))
    )


def _upsert_keys(
    v: Column, k: Column, deleted: Column, keys: Sequence[str]
) -> list[tuple[str, Column]]:
    """A key column's value in the good row: the key's for a delete, else the value's."""
    return [(n, F.when(deleted, k.getField(n)).otherwise(v.getField(n))) for n in keys]


def _upsert_good(schema: StructType, v: Column, k: Column, deleted: Column) -> list[Column]:
    cols = [
        F.when(deleted, k.getField(f.name)).otherwise(v.getField(f.name)).alias(f.name)
        for f in schema.fields
    ]
    return [*cols, deleted.alias("_deleted"), F.col("key").alias("_key"), *_coordinates()]


NOT_ENVELOPE = (
    'not a Kafka Connect envelope: expected `{"schema": ..., "payload": ...}` '
    "(JsonConverter with `schemas.enable=true`)"
)


def _kind(json_kind: Column) -> Column:
    """A VARIANT kind as a message names it (`void`, a JSON null, as `null`)."""
    return F.when(json_kind == "VOID", F.lit("null")).otherwise(F.lower(json_kind))


def _is_envelope(text: Column) -> Column:
    """Whether `text` is a JSON object of exactly `schema` and `payload`, as Kafka
    Connect's JsonConverter writes each key and value with `schemas.enable=true` (a
    row with a column named `schema` or `payload` is not taken for one)."""
    keys = F.array_sort(F.call_function("json_object_keys", text))
    return F.coalesce(keys == F.array(F.lit("payload"), F.lit("schema")), F.lit(False))


def _in_envelope(schema: StructType) -> StructType:
    return StructType([StructField("schema", StringType(), True), StructField("payload", schema)])


def _upsert_connect_exprs(
    schema: StructType, required: Sequence[str], keys: Sequence[str]
) -> _Exprs:
    """`upsert-json` whose values (and keys, when they are) are Kafka Connect envelopes:
    the row is `payload`; a null value or a null `payload` is a delete, whose key
    columns come from the key (its `payload` when the key is an envelope too). A value
    that is not an envelope is bad, not read as a row."""
    text = F.col("value").cast("string")
    key_text = F.col("key").cast("string")
    p = F.col("_parsed")
    v, k = p.getField("payload"), F.col("_kparsed")
    enveloped = _is_envelope(text)
    deleted = F.col("value").isNull() | (enveloped & p.getField(_CORRUPT).isNull() & v.isNull())
    # The key is parsed for deletes only: an upsert's key columns are in its value.
    key_env = _is_envelope(key_text)
    ke = F.col("_kenvelope")
    key_struct = F.when(
        key_env,
        F.struct(
            *[ke.getField("payload").getField(f.name).alias(f.name) for f in schema.fields],
            ke.getField(_CORRUPT).alias(_CORRUPT),
        ),
    ).otherwise(F.when(F.col("_deleted"), _from_json(key_text, schema)))
    key_payload = F.call_function(
        "schema_of_variant",
        F.call_function(
            "variant_get", F.call_function("try_parse_json", key_text), F.lit("$.payload")
        ),
    )
    key_bad = F.when(
        key_env & ~key_payload.startswith("OBJECT"),
        F.concat(
            F.lit("tombstone key's `payload` is not a JSON object (got "),
            _kind(key_payload),
            F.lit(")"),
        ),
    ).otherwise(_key_bad(k))
    value_flag = p.getField(_CORRUPT).isNotNull() | ~enveloped | _required_missing(v, required)
    is_del = F.col("_deleted")
    flagged = F.when(is_del, key_bad.isNotNull()).otherwise(value_flag)
    explain = F.when(is_del, key_bad).otherwise(_explain_connect(text, schema, v, required))
    staged = [
        ("_parsed", _from_json(text, _in_envelope(schema))),
        ("_deleted", deleted),
        ("_kenvelope", F.when(is_del & key_env, _from_json(key_text, _in_envelope(schema)))),
        ("_kparsed", key_struct),
    ]
    good = _upsert_good(schema, v, k, is_del)
    return _make_exprs(staged, good, flagged, explain, keys=_upsert_keys(v, k, is_del, keys))


def _explain_connect(
    text: Column, schema: StructType, typed: Column, required: Sequence[str]
) -> Column:
    variant = F.call_function("try_parse_json", text)
    kind = F.call_function("schema_of_variant", variant)
    payload_kind = F.call_function(
        "schema_of_variant", F.call_function("variant_get", variant, F.lit("$.payload"))
    )
    detail = F.concat_ws("; ", *_field_errors(variant, typed, schema, "$.payload", required))
    return (
        F.when(variant.isNull(), F.lit(INVALID_JSON))
        .when(
            ~kind.startswith("OBJECT"),
            F.concat(F.lit("not a JSON object (got "), F.lower(kind), F.lit(")")),
        )
        .when(~_is_envelope(text), F.lit(NOT_ENVELOPE))
        .when(
            ~payload_kind.startswith("OBJECT"),
            F.concat(
                F.lit("`payload` is not a JSON object (got "), _kind(payload_kind), F.lit(")")
            ),
        )
        .when(detail != "", detail)
        .otherwise(F.lit("does not match the schema"))
    )
