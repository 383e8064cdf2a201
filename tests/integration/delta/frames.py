"""DataFrame equality for these tests.

`pyspark.testing.assertDataFrameEqual` imports `pyspark.pandas`, which fails with the
pinned pandas 3 (`DateOffset` moved); chispa compares the same way (rows, any order).
"""

from __future__ import annotations

from chispa import assert_df_equality
from pyspark.sql import DataFrame, Row


def assert_rows(actual: DataFrame, expected: list[Row]) -> None:
    """`actual` holds exactly `expected` (order ignored, nullability ignored)."""
    want = actual.sparkSession.createDataFrame(expected, actual.schema)
    assert_df_equality(actual, want, ignore_row_order=True, ignore_nullable=True)
