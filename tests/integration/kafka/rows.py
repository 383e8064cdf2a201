"""Row-set equality for this area's tests.

`pyspark.testing.assertDataFrameEqual` imports `pyspark.pandas`, which fails with the
pandas 3.x installed here (`DateOffset` moved); until pandas is pinned below 3 this
compares the same way: same column names, same rows in any order.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Row


def assert_rows(df: DataFrame, expected: list[Row]) -> None:
    actual = df.collect()
    if expected:
        assert df.columns == list(expected[0].__fields__), (df.columns, expected[0].__fields__)
    key = repr
    assert sorted(actual, key=key) == sorted(expected, key=key), (
        f"rows differ:\n actual:   {sorted(actual, key=key)}\n expected: {sorted(expected, key=key)}"
    )
