"""Row-set equality for DataFrame tests.

`pyspark.testing.assertDataFrameEqual` imports `pyspark.pandas`, which fails with the
pinned pandas 3 (`DateOffset` moved); chispa compares the same way (rows, any order).
"""

from __future__ import annotations

from chispa import assert_df_equality
from pyspark.sql import DataFrame, Row


def assert_rows(actual: DataFrame, expected: list[Row]) -> None:
    """`actual` holds exactly `expected` (order and nullability ignored); when the
    expected rows name their fields, `actual` has exactly those columns, in that order."""
    if expected and hasattr(expected[0], "__fields__"):
        fields = list(expected[0].__fields__)
        assert actual.columns == fields, (actual.columns, fields)
    want = actual.sparkSession.createDataFrame(expected, actual.schema)
    assert_df_equality(actual, want, ignore_row_order=True, ignore_nullable=True)
