"""Quarantine rows built in Arrow, without a Spark job, with the values Spark's path
gives them (`warehouse.quality.quarantine`):

- `ParseErrorRows`, inside the Arrow landing tasks, for records whose bad row is known
  without Spark (`streams.landing.BadRecords`): a null value, a value cut off, a
  plainly typed row without a required field. Reason `parse error: <_error>`, no
  failed expectations, the Kafka coordinates, the raw key and value, no `row`;
- `HeldRows`, on the driver, for the typed rows a `quarantine` expectation held
  (`RowChecks.quarantined`'s rows): reason `failed expectations: <ids>`, those ids,
  the coordinates, no raw bytes, and `row`, the payload as Spark's `to_json` writes it
  (`row_json`), for payloads of the types it writes exactly.

`quarantined_at` is the time the driver set for the batch, where Spark's is the time
its write job started.

No Spark import: `ParseErrorRows` runs inside Spark's Python workers, and `HeldRows`
gets the one thing it needs from the JVM (the text of doubles) as a function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PARSE_ERROR = "parse error: "
UNKNOWN_ERROR = "unknown"
"""A parse error's reason is `PARSE_ERROR` + its text, `UNKNOWN_ERROR` without one."""
FAILED_EXPECTATIONS = "failed expectations: "
COORDINATES = {
    "source_topic": "_topic",
    "source_partition": "_partition",
    "source_offset": "_offset",
    "source_timestamp": "_timestamp",
}
"""Quarantine column: the typed rows' Kafka coordinate it is."""

JavaDoubles = Callable[[Sequence[float]], list[str]]
"""Doubles' text as Java's `Double.toString` writes it, in order."""


def _batch(root: str, schema: pa.Schema, columns: dict[str, pa.Array]) -> pa.RecordBatch:
    """The quarantine rows of `columns` in the quarantine table's `schema`."""
    unknown = [f.name for f in schema if f.name not in columns]
    if unknown:
        raise ValueError(f"quarantine table `{root}`: no value for column(s) {', '.join(unknown)}")
    return pa.RecordBatch.from_arrays([columns[f.name].cast(f.type) for f in schema], schema=schema)


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
        reason = pc.fill_null(bad.column("_error"), UNKNOWN_ERROR)
        return _batch(
            self.root,
            self.schema,
            {
                "reason": pc.binary_join_element_wise(PARSE_ERROR, reason, ""),
                "failed_expectations": pa.ListArray.from_arrays(
                    pa.array([0] * (n + 1), pa.int32()), pa.array([], pa.string())
                ),
                "batch_id": pa.repeat(pa.scalar(self.batch_id, pa.int64()), n),
                "source_topic": bad.column("topic"),
                "source_partition": bad.column("partition"),
                "source_offset": bad.column("offset"),
                "source_timestamp": bad.column("timestamp"),
                "raw_key": bad.column("key"),
                "raw_value": bad.column("value"),
                "row": pa.nulls(n, pa.string()),
                "quarantined_at": pa.repeat(pa.scalar(self.at, pa.timestamp("us", "UTC")), n),
            },
        )


@dataclass(frozen=True)
class HeldRows:
    """`root`, `schema`, `batch_id`, `at` as `ParseErrorRows`'; `doubles`: the JVM's
    text of doubles (`JavaDoubles`)."""

    root: str
    schema: pa.Schema
    batch_id: int
    at: datetime
    doubles: JavaDoubles

    def rows(
        self, held: pa.RecordBatch, payload: Sequence[str], failed: pa.Array
    ) -> pa.RecordBatch:
        """The quarantine rows of `held` (typed rows: `payload` fields and coordinates),
        `failed` the ids of the expectations each failed (`ArrowChecks.failed_ids`)."""
        n = held.num_rows
        reason = pc.binary_join_element_wise(FAILED_EXPECTATIONS, pc.binary_join(failed, ", "), "")
        return _batch(
            self.root,
            self.schema,
            {
                "reason": reason,
                "failed_expectations": failed,
                "batch_id": pa.repeat(pa.scalar(self.batch_id, pa.int64()), n),
                **{q: held.column(c) for q, c in COORDINATES.items()},
                "raw_key": pa.nulls(n, pa.binary()),
                "raw_value": pa.nulls(n, pa.binary()),
                "row": row_json(held, payload, self.doubles),
                "quarantined_at": pa.repeat(pa.scalar(self.at, pa.timestamp("us", "UTC")), n),
            },
        )


def writes_json(t: pa.DataType) -> bool:
    """Whether `row_json` writes a column of type `t` as Spark's `to_json` does (for
    a timestamp: in a session whose time zone is UTC, years 1000 to 9999,
    `timestamps_in_range`)."""
    return (
        pa.types.is_integer(t)
        or pa.types.is_float64(t)
        or pa.types.is_string(t)
        or pa.types.is_boolean(t)
        or t == pa.timestamp("us", "UTC")
    )


_FIRST_US, _END_US = -30610224000 * 10**6, 253402300800 * 10**6
"""1000-01-01T00:00:00Z and 10000-01-01T00:00:00Z in microseconds."""


def timestamps_in_range(col: pa.Array | pa.ChunkedArray) -> bool:
    """Whether every timestamp of `col` has a four-digit year, as `row_json` writes."""
    us = col.cast(pa.int64())
    lo, hi = pc.min_max(us).values()
    return lo.as_py() is None or (lo.as_py() >= _FIRST_US and hi.as_py() < _END_US)


def row_json(rows: pa.RecordBatch, names: Sequence[str], doubles: JavaDoubles) -> pa.Array:
    """Per row, the JSON object of the columns `names` (of `writes_json` types) as
    Spark's `to_json(struct(...), {"ignoreNullFields": "false"})` writes it: Jackson's
    generator, members in order, `null` for a null, strings escaped as Jackson escapes
    them, a double as Java's `Double.toString` (`doubles`), a timestamp as
    `yyyy-MM-dd'T'HH:mm:ss.SSS` and `Z` (Spark's default `timestampFormat` in a UTC
    session; `timestamps_in_range` holds)."""
    members = []
    for name in names:
        col = rows.column(name)
        t = col.type
        if pa.types.is_string(t):
            text = _json_string(col)
        elif pa.types.is_boolean(t):
            text = pc.if_else(col, "true", "false")
        elif pa.types.is_float64(t):
            text = _java_doubles(col, doubles)
        elif pa.types.is_integer(t):
            text = col.cast(pa.string())
        elif t == pa.timestamp("us", "UTC"):
            text = _timestamps(col)
        else:
            raise TypeError(f"row_json: column `{name}` of type {t} is not written here")
        members.append(pc.binary_join_element_wise(_json_key(name), pc.fill_null(text, "null"), ""))
    if not members:  # Spark's path has no `row` without payload columns
        return pa.nulls(rows.num_rows, pa.string())
    return pc.binary_join_element_wise("{", pc.binary_join_element_wise(*members, ","), "}", "")


_SHORT = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"}


def _escape(c: int) -> str:
    """Jackson's escape of a control character: short where JSON has one, else
    `\\u00XX` in upper-case hex."""
    return _SHORT.get(c, f"\\u{c:04X}")


def _json_key(name: str) -> str:
    body = name.replace("\\", "\\\\").replace('"', '\\"')
    body = "".join(_escape(ord(ch)) if ord(ch) < 0x20 else ch for ch in body)
    return f'"{body}":'


def _json_string(col: pa.Array) -> pa.Array:
    text = pc.replace_substring(pc.replace_substring(col, "\\", "\\\\"), '"', '\\"')
    if pc.any(pc.match_substring_regex(text, "[\\x00-\\x1f]")).as_py():
        for c in range(0x20):
            text = pc.replace_substring(text, chr(c), _escape(c))
    return pc.binary_join_element_wise('"', text, '"', "")


def _timestamps(col: pa.Array) -> pa.Array:
    """`"2026-11-26T01:02:03.500Z"`: milliseconds, the microseconds dropped (floored, as
    Java's formatter does before 1970 too)."""
    us = col.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    seconds, rest = np.divmod(us, 1_000_000)
    whole = pc.strftime(pa.array(seconds, pa.timestamp("s", "UTC")), "%Y-%m-%dT%H:%M:%S")
    millis = pc.utf8_lpad(pa.array(rest // 1000).cast(pa.string()), 3, "0")
    text = pc.binary_join_element_wise('"', whole, ".", millis, 'Z"', "")
    return pc.if_else(col.is_valid(), text, pa.scalar(None, pa.string()))


def _java_doubles(col: pa.Array, doubles: JavaDoubles) -> pa.Array:
    """The text of each double of `col` (null stays null), each distinct value (by its
    bits: 0.0 and -0.0 differ) formatted once."""
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    values = col.fill_null(0.0).to_numpy(zero_copy_only=False)
    bits, inverse = np.unique(values.view(np.int64), return_inverse=True)
    texts = doubles([float(v) for v in bits.view(np.float64)])
    if len(texts) != len(bits):
        raise ValueError(f"{len(texts)} texts for {len(bits)} doubles")
    out = np.array(texts, dtype=object)[inverse]
    return pa.array(out, pa.string(), mask=~valid)
