"""Quarantine rows built in Arrow, inside the Arrow landing tasks, for records whose bad
row is known without Spark (`streams.landing.BadRecords`): a null value, a value cut
off, a plainly typed row without a required field.

`ParseErrorRows.rows` gives each the row `quarantine_from_parse_errors` gives its
`parse_kafka` bad row (`warehouse.quality.quarantine`): reason `parse error: <_error>`,
no failed expectations, the Kafka coordinates, the raw key and value, no `row`. Its
`quarantined_at` is the time the driver made it for the batch, where Spark's is the
time its write job started.

No Spark import: this runs inside Spark's Python workers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc

_PARSE_ERROR = "parse error: "


@dataclass(frozen=True)
class ParseErrorRows:
    """`root`, `schema`: the quarantine table's (its Arrow schema, `QUARANTINE_SCHEMA`);
    `batch_id`, `at`: the batch's id and its quarantine time (UTC)."""

    root: str
    schema: pa.Schema
    batch_id: int
    at: datetime

    def rows(self, bad: pa.RecordBatch) -> pa.RecordBatch:
        """The quarantine rows of `bad` (`streams.landing.BAD_COLUMNS`)."""
        n = bad.num_rows
        columns: dict[str, Callable[[], pa.Array]] = {
            "reason": lambda: pc.binary_join_element_wise(
                _PARSE_ERROR, pc.fill_null(bad.column("_error"), "unknown"), ""
            ),
            "failed_expectations": lambda: pa.ListArray.from_arrays(
                pa.array([0] * (n + 1), pa.int32()), pa.array([], pa.string())
            ),
            "batch_id": lambda: pa.repeat(pa.scalar(self.batch_id, pa.int64()), n),
            "source_topic": lambda: bad.column("topic"),
            "source_partition": lambda: bad.column("partition"),
            "source_offset": lambda: bad.column("offset"),
            "source_timestamp": lambda: bad.column("timestamp"),
            "raw_key": lambda: bad.column("key"),
            "raw_value": lambda: bad.column("value"),
            "row": lambda: pa.nulls(n, pa.string()),
            "quarantined_at": lambda: pa.repeat(pa.scalar(self.at, pa.timestamp("us", "UTC")), n),
        }
        unknown = [f.name for f in self.schema if f.name not in columns]
        if unknown:
            raise ValueError(
                f"quarantine table `{self.root}`: no value for column(s) {', '.join(unknown)}"
            )
        return pa.RecordBatch.from_arrays(
            [columns[f.name]().cast(f.type) for f in self.schema], schema=self.schema
        )
