"""Quarantine rows: one schema for every record a batch sets aside, whether it failed
an expectation or did not parse, with its Kafka coordinates and raw bytes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from warehouse.quality.arrow_quarantine import PARSE_ERROR, UNKNOWN_ERROR

COORDINATES = ("_topic", "_partition", "_offset", "_timestamp")
"""Kafka coordinates carried by Kafka-sourced tables; kept out of the quarantined `row`."""
CLUSTER = "_cluster"
"""A federated table's coordinate beside them (the record's cluster): kept in `row`, so
that a quarantined record of a federation names its cluster in the fixed schema."""

QUARANTINE_SCHEMA = StructType(
    [
        StructField("reason", StringType()),
        StructField("failed_expectations", ArrayType(StringType())),
        StructField("batch_id", LongType()),
        StructField("source_topic", StringType()),
        StructField("source_partition", IntegerType()),
        StructField("source_offset", LongType()),
        StructField("source_timestamp", TimestampType()),
        StructField("raw_key", BinaryType()),
        StructField("raw_value", BinaryType()),
        StructField("row", StringType()),
        StructField("quarantined_at", TimestampType()),
    ]
)
"""One schema for every quarantined record: failed expectations and parse errors alike."""


def _coordinate(df_cols: Sequence[str], name: str, dtype: str) -> Column:
    return F.col(name).cast(dtype) if name in df_cols else F.lit(None).cast(dtype)


def to_quarantine(
    df: DataFrame,
    *,
    data_cols: Sequence[str],
    reason: Column,
    failed: Column,
    batch_id: int,
    raw_key: str | None,
    raw_value: str | None,
) -> DataFrame:
    payload = [c for c in data_cols if c not in COORDINATES]
    row = (
        F.to_json(F.struct(*[F.col(c) for c in payload]), {"ignoreNullFields": "false"})
        if payload
        else F.lit(None)
    )
    return df.select(
        reason.cast("string").alias("reason"),
        failed.cast("array<string>").alias("failed_expectations"),
        F.lit(int(batch_id)).cast("bigint").alias("batch_id"),
        _coordinate(data_cols, "_topic", "string").alias("source_topic"),
        _coordinate(data_cols, "_partition", "int").alias("source_partition"),
        _coordinate(data_cols, "_offset", "bigint").alias("source_offset"),
        _coordinate(data_cols, "_timestamp", "timestamp").alias("source_timestamp"),
        (F.col(raw_key) if raw_key else F.lit(None)).cast("binary").alias("raw_key"),
        (F.col(raw_value) if raw_value else F.lit(None)).cast("binary").alias("raw_value"),
        row.cast("string").alias("row"),
        F.current_timestamp().alias("quarantined_at"),
    ).to(QUARANTINE_SCHEMA)


def quarantine_from_parse_errors(bad_df: DataFrame, *, batch_id: int) -> DataFrame:
    """`parse_kafka`'s `bad` frame (`key, value, _topic, ..., _error`) as quarantine rows.

    `reason` is `parse error: <_error>`, `failed_expectations` is empty, the raw
    key and value are kept as bytes and `row` is null (there is no parsed row), or for a
    federated table's record `{"_cluster": ...}`, the cluster it was read from.
    """
    cols = bad_df.columns
    error = F.col("_error") if "_error" in cols else F.lit(UNKNOWN_ERROR)
    return to_quarantine(
        bad_df,
        data_cols=[c for c in cols if c in COORDINATES or c == CLUSTER],
        reason=F.concat(F.lit(PARSE_ERROR), F.coalesce(error.cast("string"), F.lit(UNKNOWN_ERROR))),
        failed=F.array().cast("array<string>"),
        batch_id=batch_id,
        raw_key="key" if "key" in cols else None,
        raw_value="value" if "value" in cols else None,
    )


def java_doubles(spark: Any) -> Callable[[Sequence[float]], list[str]] | None:
    """The JVM's text of doubles (`arrow_quarantine.JavaDoubles`), as Spark's `to_json`
    writes them: through Jackson (`JsonNode` writes a double as its generator does,
    with `Double.toString`, which JDK 17 and JDK 19+ write differently for some
    values). One call to the JVM per call, after one that makes the mapper. None
    without a JVM (Spark Connect)."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return None
    mapper: list[Any] = []  # made on first use: naming a class costs Py4J a lookup

    def texts(values: Sequence[float]) -> list[str]:
        if not values:
            return []
        if not mapper:
            mapper.append(jvm.com.fasterxml.jackson.databind.ObjectMapper())
        # Python's repr reads back as the same double, and Jackson reads a JSON number
        # with Java's exact `Double.parseDouble`.
        array = "[" + ",".join(repr(float(v)) for v in values) + "]"
        return str(mapper[0].readTree(array).toString())[1:-1].split(",")

    return texts
