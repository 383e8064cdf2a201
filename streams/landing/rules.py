"""Row rules on the Arrow path: which typed rows a table keeps, and which it sets aside.

`kafka_json_append` can judge the rows Arrow typed inside its tasks, before they are
written: the caller passes a `RowRules` (the framework compiles a table's row-level
expectations into one; `streams` knows nothing of expectations). Each block of typed
rows (the payload fields, then the Kafka coordinates) gets a `RowVerdict`: the rows
the table keeps, the rows held for the caller's quarantine (staged in Parquet, typed,
and handed back to the driver as a Spark frame), and per rule how many rows it judged
and how many failed it. A row neither kept nor held is dropped.

The tasks also know, without Spark, the bad row `parse_kafka` would give some records
(`split_block(explain=True)`: a null value, a value cut off, a plainly typed row
without a required field). With a `BadRecords` from the caller they write those as rows
of the caller's quarantine table, in Parquet files under its root, and hand the files
back for the caller to commit, instead of staging the records for Spark's parse.

`RowRules` and `BadRecords` objects are pickled into Spark's Python workers: they must
be picklable and must not need Spark.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import pyarrow as pa


class RowVerdict(NamedTuple):
    """One block judged. `keep` and `hold`: boolean masks without nulls, never both true
    for a row; `checked[i]` and `failed[i]`: rows rule `i` judged and rows that failed it."""

    keep: pa.Array
    hold: pa.Array
    checked: tuple[int, ...]
    failed: tuple[int, ...]


class RowRules(Protocol):
    """Judges blocks of typed rows inside the Arrow tasks (module doc)."""

    @property
    def size(self) -> int:
        """The number of rules (the length of a verdict's `checked` and `failed`)."""
        ...

    def judge(self, rows: pa.RecordBatch) -> RowVerdict:
        """The verdict on `rows`."""
        ...


class BadRecords(Protocol):
    """The quarantine rows of the records the Arrow tasks know are bad (module doc)."""

    @property
    def root(self) -> str:
        """The quarantine table's root: the tasks write their files under it."""
        ...

    @property
    def schema(self) -> pa.Schema:
        """The quarantine table's rows (unpartitioned)."""
        ...

    def rows(self, bad: pa.RecordBatch) -> pa.RecordBatch:
        """The quarantine rows (`schema`) of `bad`: `split_block`'s `BAD_COLUMNS`, the
        raw records and their `parse_kafka` reasons (`_error`)."""
        ...
