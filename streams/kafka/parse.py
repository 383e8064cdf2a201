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
import uuid
from collections.abc import Callable, Sequence
from typing import Literal, NamedTuple

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StringType, StructField, StructType

from streams.kafka.columns import COORDINATES, KAFKA_COLUMNS
from streams.kafka.errors import KafkaConfigError

logger = logging.getLogger(__name__)

Format = Literal["json", "raw", "debezium-json", "upsert-json"]
FORMATS: tuple[str, ...] = ("json", "raw", "debezium-json", "upsert-json")

_CORRUPT = "_corrupt_record"
_DEBEZIUM_OPS = ("c", "u", "d", "r")


Persist = Callable[[DataFrame], DataFrame]
"""`persist` hook of `parse_kafka`: given every record of the batch once, flat and flagged."""


class ParsedFrames(NamedTuple):
    """`good`: typed rows plus Kafka coordinates; `bad`: the raw record and `_error`."""

    good: DataFrame
    bad: DataFrame


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


def _coordinates() -> list[Column]:
    return [F.col(c.removeprefix("_")).alias(c) for c in COORDINATES]


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
            out.append(F.when(absent, F.lit(f"missing required field `{field.name}`")))
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
        F.when(text.isNull(), F.lit("value is null"))
        .when(variant.isNull(), F.lit("invalid JSON"))
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


class _Stage(NamedTuple):
    persist: Persist | None
    reparse: Callable[[DataFrame], ParsedFrames]
    observe: Observation | None


_RAW = "__wh_raw_"
_FLAG, _KEEP = "__wh_flagged", "__wh_keep"


class _Exprs(NamedTuple):
    """Every Column one parse applies, built from the format, schema and required fields
    alone: unresolved expressions do not depend on the frame they are applied to, and
    building them is ~1500 Py4J calls (0.35-0.6 s of the driver per batch, measured on a
    5-field schema), so `_exprs` builds them once per JVM and reuses them."""

    staged: tuple[tuple[str, Column], ...]
    """Columns added one after another before the split (`_parsed`, ...)."""
    good: tuple[Column, ...]
    flag: Column
    keep: Column
    observe_plain: tuple[Column, Column]
    observe_persisted: tuple[Column, Column]
    plain_good: Column
    plain_bad: Column
    persisted_good: Column
    persisted_bad: Column
    bad: tuple[Column, ...]
    flat: tuple[Column, ...]
    raw_back: tuple[Column, ...]


def _make_exprs(
    staged: list[tuple[str, Column]],
    good_cols: list[Column],
    flagged: Column,
    explain: Column,
    keep: Column | None = None,
) -> _Exprs:
    keep = F.lit(True) if keep is None else keep
    flag = F.coalesce(flagged, F.lit(False))
    flag_col, keep_col = F.col(_FLAG), F.col(_KEEP)
    return _Exprs(
        staged=tuple(staged),
        good=tuple(good_cols),
        flag=flag,
        keep=keep,
        observe_plain=_metrics(flag_col & keep),
        observe_persisted=_metrics(keep_col & flag_col),
        plain_good=~flag_col,
        plain_bad=flag_col,
        persisted_good=keep_col & ~flag_col,
        persisted_bad=keep_col & flag_col,
        bad=(F.col("key"), F.col("value"), *_coordinates(), explain.alias("_error")),
        flat=(
            *[F.col(c).alias(_RAW + c) for c in KAFKA_COLUMNS],
            *good_cols,
            flag.alias(_FLAG),
            keep.alias(_KEEP),
        ),
        raw_back=tuple(F.col(_RAW + c).alias(c) for c in KAFKA_COLUMNS),
    )


def _split(df: DataFrame, e: _Exprs, stage: _Stage) -> ParsedFrames:
    """`good`/`bad` of `df` parsed by `e`. Only the flag is computed for every record: the
    explanation (a second, VARIANT parse of the text) runs on the flagged rows alone,
    after the filter, where it costs nothing for a clean batch.

    With a `stage`, what gets persisted is flat: the Kafka columns, the good columns
    already extracted and the flags; no `_parsed` struct and no `headers` (Spark caches
    nested values one by one, several times slower than the parse itself). The
    explanation of the bad rows is then computed by parsing those few rows again."""
    staged = df
    for name, col in e.staged:
        staged = staged.withColumn(name, col)
    if stage.persist is None:
        s = staged.withColumn(_FLAG, e.flag)
        # Without an observer in between, Spark pushes the good/bad filter below the
        # projection that parses and inlines the parse into it: every record would be
        # parsed twice (measured: 4.0-4.9 s against 2.6 s per 1M). Observed metrics are
        # a node filters do not cross, so one of our own is always there.
        observe = stage.observe or f"__wh_parse_{uuid.uuid4().hex}"
        s = s.observe(observe, *e.observe_plain).where(e.keep)
        good = s.where(e.plain_good).select(*e.good)
        bad = s.where(e.plain_bad).select(*e.bad)
        return ParsedFrames(good, bad)
    flat = stage.persist(staged.select(*e.flat))
    if stage.observe is not None:
        flat = flat.observe(stage.observe, *e.observe_persisted)
    names = [c for c in flat.columns if c not in (_FLAG, _KEEP) and not c.startswith(_RAW)]
    good = flat.where(e.persisted_good).select(*names)
    flagged_raw = flat.where(e.persisted_bad).select(*e.raw_back)
    return ParsedFrames(good, stage.reparse(flagged_raw).bad)


def _metrics(flagged: Column) -> tuple[Column, Column]:
    """`records` (every record) and `flagged` (those bound for `bad`)."""
    return (
        F.count(F.lit(1)).alias("records"),
        F.coalesce(F.sum(flagged.cast("long")), F.lit(0)).alias("flagged"),
    )


def _observed(df: DataFrame, observe: Observation | str | None, flagged: Column) -> DataFrame:
    """`df` reporting `records` (every record) and `flagged` (those bound for `bad`) to
    `observe` (an `Observation`, or a name for `df.observe`)."""
    if observe is None:
        return df
    return df.observe(observe, *_metrics(flagged))


def _check_required(schema: StructType, required: Sequence[str]) -> None:
    unknown = [r for r in required if r not in schema.fieldNames()]
    if unknown:
        raise KafkaConfigError(
            f"Required field `{unknown[0]}` is not in the schema ({', '.join(f'`{n}`' for n in schema.fieldNames())}). "
            "Add it to the schema or drop it from `required`.",
            option="required",
        )


def _with_corrupt(schema: StructType) -> StructType:
    return StructType([*schema.fields, StructField(_CORRUPT, StringType(), True)])


def _from_json(text: Column, schema: StructType) -> Column:
    return F.from_json(text, _with_corrupt(schema), {"columnNameOfCorruptRecord": _CORRUPT})


def _json_exprs(schema: StructType, required: Sequence[str]) -> _Exprs:
    text = F.col("value").cast("string")
    typed = F.col("_parsed")
    flagged = (
        text.isNull() | typed.getField(_CORRUPT).isNotNull() | _required_missing(typed, required)
    )
    cols = [typed.getField(f.name).alias(f.name) for f in schema.fields]
    explain = _explain(text, schema, typed, required)
    return _make_exprs(
        [("_parsed", _from_json(text, schema))], [*cols, *_coordinates()], flagged, explain
    )


def _parse_raw(df: DataFrame, stage: _Stage) -> ParsedFrames:
    if stage.persist is not None:
        df = stage.persist(df)
    df = _observed(df, stage.observe, F.lit(False))
    cols = [F.col("key"), F.col("value")]
    if "headers" in df.columns:
        cols.append(F.col("headers"))
    good = df.select(*cols, *_coordinates())
    bad = df.where(F.lit(False)).select(
        F.col("key"), F.col("value"), *_coordinates(), F.lit(None).cast("string").alias("_error")
    )
    return ParsedFrames(good, bad)


def _debezium_exprs(schema: StructType, required: Sequence[str]) -> _Exprs:
    envelope = StructType.fromJson(
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
                            {"name": "ts_ms", "type": "long", "nullable": True, "metadata": {}}
                        ],
                    },
                    "nullable": True,
                    "metadata": {},
                },
                {"name": "ts_ms", "type": "long", "nullable": True, "metadata": {}},
            ],
        }
    )
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
    field_errs = F.concat_ws("; ", *_field_errors(image_variant, img, schema, "$", required))
    kind = F.call_function("schema_of_variant", variant)
    explain = (
        F.when(variant.isNull(), F.lit("invalid JSON"))
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
        | _required_missing(img, required)
    )
    cols = [img.getField(f.name).alias(f.name) for f in schema.fields]
    source_ts = F.coalesce(e.getField("source").getField("ts_ms"), e.getField("ts_ms"))
    good_cols = [*cols, op.alias("_op"), source_ts.alias("_source_ts_ms"), *_coordinates()]
    # Tombstones follow deletes for compaction; they carry no row image.
    staged = [("_parsed", _from_json(text, outer)), ("_env", env), ("_image", image)]
    return _make_exprs(staged, good_cols, flagged, explain, keep=F.col("value").isNotNull())


def _upsert_exprs(schema: StructType, required: Sequence[str]) -> _Exprs:
    text = F.col("value").cast("string")
    key_text = F.col("key").cast("string")
    v, k = F.col("_parsed"), F.col("_kparsed")
    deleted = F.col("value").isNull()
    key_kind = F.call_function("schema_of_variant", F.call_function("try_parse_json", key_text))
    key_bad = (
        F.when(F.col("key").isNull(), F.lit("tombstone without a key"))
        .when(
            key_kind.isNull() | ~key_kind.startswith("OBJECT"),
            F.lit("tombstone key is not a JSON object"),
        )
        .when(k.getField(_CORRUPT).isNotNull(), F.lit("tombstone key does not match the schema"))
    )
    value_flag = v.getField(_CORRUPT).isNotNull() | _required_missing(v, required)
    flagged = F.when(deleted, key_bad.isNotNull()).otherwise(value_flag)
    explain = F.when(deleted, key_bad).otherwise(_explain(text, schema, v, required))
    cols = [
        F.when(deleted, k.getField(f.name)).otherwise(v.getField(f.name)).alias(f.name)
        for f in schema.fields
    ]
    good_cols = [
        *cols,
        deleted.alias("_deleted"),
        F.col("key").alias("_key"),
        *_coordinates(),
    ]
    staged = [("_parsed", _from_json(text, schema)), ("_kparsed", _from_json(key_text, schema))]
    return _make_exprs(staged, good_cols, flagged, explain)


def parse_kafka(
    df: DataFrame,
    *,
    format: Format,
    schema: StructType | str | None = None,
    required: Sequence[str] = (),
    persist: Persist | None = None,
    observe: Observation | None = None,
) -> ParsedFrames:
    """Split Kafka records (`key, value, topic, partition, offset, timestamp`) into typed
    `good` rows and `bad` rows with an `_error` reason. `required` names fields that must
    be present and non-null. Works on batch and streaming frames.

    `persist` (batch frames): called once with the parsed and flagged frame both
    results derive from; returning it persisted lets `good` and `bad` share one read
    and one parse of the records instead of two.

    `observe`: an unused `Observation` that collects `records` (every record of `df`)
    and `flagged` (how many go to `bad`) during the first action over `good` or `bad`;
    it lets a caller write `good` in one pass and read `bad` only when it is not empty."""
    missing = [c for c in KAFKA_COLUMNS if c not in df.columns]
    if missing:
        raise KafkaConfigError(
            f"parse_kafka needs the Kafka columns; `{missing[0]}` is missing from "
            f"({', '.join(df.columns)}). Pass the frame from read_kafka_stream.",
            option="df",
        )

    def reparse(frame: DataFrame) -> ParsedFrames:
        return parse_kafka(frame, format=format, schema=schema, required=required)

    stage = _Stage(persist, reparse, observe)
    if format == "raw":
        return _parse_raw(df, stage)
    if format not in FORMATS:
        raise KafkaConfigError(
            f"Unknown Kafka format `{format}`; expected one of {', '.join(f'`{x}`' for x in FORMATS)}.",
            option="format",
        )
    struct = as_struct(schema, format)
    _check_required(struct, required)
    jvm = getattr(df.sparkSession, "_jvm", None)  # None under Spark Connect
    return _split(df, _exprs(jvm, format, struct.json(), tuple(required)), stage)


_BUILDERS: dict[str, Callable[[StructType, Sequence[str]], _Exprs]] = {
    "json": _json_exprs,
    "debezium-json": _debezium_exprs,
    "upsert-json": _upsert_exprs,
}


@functools.lru_cache(maxsize=64)
def _exprs(jvm: object, format: str, schema_json: str, required: tuple[str, ...]) -> _Exprs:
    """The expressions of one parse, per JVM (`jvm` keeps a cached set from outliving the
    gateway its Columns live in)."""
    schema = StructType.fromJson(json.loads(schema_json))
    return _BUILDERS[format](schema, required)
