"""Helpers of the CDC tests: Debezium/upsert records as Kafka-shaped frames, table reads."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from chispa import assert_df_equality
from deltalake import DeltaTable
from pyspark.sql import DataFrame, Row, SparkSession

KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp"
)
USERS_DDL = "user_id bigint, name string, city string"
UTC = dt.UTC


def ts(ms: int) -> dt.datetime:
    """The `valid_from`/`valid_to` Spark returns for epoch millis `ms` (session TZ is UTC)."""
    return dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)


def kafka_time(offset: int) -> dt.datetime:
    """The Kafka timestamp `kafka_frame` gives the record at `offset`: one second apart."""
    return dt.datetime(2024, 1, 1) + dt.timedelta(seconds=offset)


def debezium(op: str, ts_ms: int, *, before: dict | None = None, after: dict | None = None) -> str:
    return json.dumps(
        {"before": before, "after": after, "op": op, "source": {"ts_ms": ts_ms}, "ts_ms": ts_ms}
    )


def user(user_id: int, name: str | None = None, city: str | None = None) -> dict[str, Any]:
    return {"user_id": user_id, "name": name, "city": city}


def kafka_frame(
    spark: SparkSession,
    records: Sequence[tuple[Any, str | None]],
    *,
    first_offset: int = 0,
    topic: str = "shop.users",
) -> DataFrame:
    """Records `(key, value)` as the Kafka source yields them, offsets from `first_offset`."""
    rows = []
    for i, (key, value) in enumerate(records):
        k = json.dumps(key).encode() if key is not None else None
        v = value.encode() if value is not None else None
        offset = first_offset + i
        rows.append((k, v, topic, 0, offset, kafka_time(offset)))
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def read_table(spark: SparkSession, path: str, columns: Sequence[str]) -> DataFrame:
    data = pa.table(DeltaTable(str(path)).to_pyarrow_table(columns=list(columns)))
    return spark.createDataFrame(data)


def assert_rows(actual: DataFrame, expected: list[Row]) -> None:
    """`actual` holds exactly `expected` (order and nullability ignored)."""
    want = actual.sparkSession.createDataFrame(expected, actual.schema)
    assert_df_equality(actual, want, ignore_row_order=True, ignore_nullable=True)
