"""Rows of a test as Spark types them, and rows compared as multisets.

A test's rows are YAML objects; `typed_rows` reads them as JSON against the table's
own schema (and names the rows with a value that is not of its column's type), so
an expected `12.5` meets a `DECIMAL(12,2)` column as `12.50` and `"2024-01-01
10:00:00"` meets a timestamp as that instant. Binary columns take their text as UTF-8.
`difference` compares the collected rows on the listed columns, order ignored.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

_FLOAT_DIGITS = 9
"""Decimal places a floating-point value is compared to (sums of doubles differ in the
last bits by the order Spark adds them in)."""


_CORRUPT = "__warehouse_test_corrupt"


def typed_rows(
    spark: SparkSession, rows: Sequence[dict[str, Any]], schema: StructType
) -> tuple[DataFrame, list[int]]:
    """`rows` as a DataFrame of `schema` (a column a row does not list is null), and the
    indexes of the rows with a value that is not of its column's type."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    binary = {f.name for f in schema.fields if isinstance(f.dataType, BinaryType)}
    as_text = StructType(
        [
            *(StructField(f.name, StringType()) if f.name in binary else f for f in schema.fields),
            StructField(_CORRUPT, StringType()),
        ]
    )
    text = spark.createDataFrame(
        [(i, json.dumps(r, default=str)) for i, r in enumerate(rows)], "i int, value string"
    )
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
    parsed = text.select("i", F.from_json("value", as_text, options).alias("r"))
    bad = parsed.where(F.col(f"r.{_CORRUPT}").isNotNull()).select("i").collect()
    frame = parsed.orderBy("i").select(
        *[
            F.col(f"r.`{f.name}`").cast("binary").alias(f.name)
            if f.name in binary
            else F.col(f"r.`{f.name}`")
            for f in schema.fields
        ]
    )
    return frame, sorted(int(r.i) for r in bad)


def collected(df: DataFrame, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """The rows of `df` on `columns`, as comparable tuples."""
    return [tuple(_comparable(v) for v in row) for row in df.select(*columns).collect()]


def difference(
    expected: list[tuple[Any, ...]], actual: list[tuple[Any, ...]]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(missing, unexpected): the expected rows the table lacks and the table's rows not
    expected, counting repeats."""
    want, have = Counter(expected), Counter(actual)
    return sorted((want - have).elements(), key=repr), sorted((have - want).elements(), key=repr)


def shown(columns: Sequence[str], row: tuple[Any, ...]) -> str:
    """A compared row as one line of JSON."""
    return json.dumps(dict(zip(columns, (_plain(v) for v in row), strict=True)), default=str)


def _comparable(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, _FLOAT_DIGITS)
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return tuple(sorted((k, _comparable(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):  # arrays, and structs (Row is a tuple)
        return tuple(_comparable(v) for v in value)
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value
