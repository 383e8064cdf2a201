"""Helpers of the Delta integration tests: read a table back with delta-rs into Spark."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streams.delta.arrow import read_table as read_arrow


@pytest.fixture
def read_table(spark):
    """`read_table(path)` -> a Spark DataFrame of the table's current snapshot (via delta-rs)."""

    def read(path) -> object:
        data = pa.table(read_arrow(str(path)))
        return spark.createDataFrame(data)

    return read
