"""A Delta table's live data files, as its log's Add actions, and what they add up to.

Read by the commits (`streams.delta.driver_merge`, `streams.delta.native`) and by
maintenance (`streams.delta.maintenance`); imports nothing of this package.
"""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable


def add_actions(table: DeltaTable) -> pa.Table:
    """The table's live data files, one row each, with their statistics as columns."""
    return pa.table(table.get_add_actions(flatten=True))


def file_rows(adds: pa.Table) -> int | None:
    """The rows of the files in `adds` (`add_actions`) by their `numRecords` statistics,
    or None when a file has none."""
    counts = adds.column("num_records").to_pylist() if adds.num_rows else []
    return None if any(c is None for c in counts) else sum(counts)


def file_bytes(adds: pa.Table) -> int:
    """The bytes of the files in `adds` (`add_actions`)."""
    return sum(adds.column("size_bytes").to_pylist()) if adds.num_rows else 0
