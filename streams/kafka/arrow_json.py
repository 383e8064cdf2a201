"""Parse Kafka JSON values in bulk with Arrow, where Arrow's result is Spark's.

`parse_kafka` types JSON values with Spark's `from_json`: every record becomes a JVM
row. For the common case (a flat object of integers, numbers, strings and booleans),
Arrow's JSON reader types a whole block of values at once in C++, several times
cheaper (docs/benchmarks.md, "Arrow-path spike"). But the two parsers disagree on
some inputs: Arrow refuses what Spark accepts (a number in a string field, single
quotes, `NaN`), and accepts a few things Spark would type differently (`-0` in a
double field is -0.0 for Arrow and 0.0 for Spark) or not at all (two objects in one
value, invalid UTF-8 inside a string).

So `split_block` only keeps the rows for which both parsers agree, and hands every
other record back untouched (`ArrowParse.fallback`), for Spark's parse to type or
quarantine exactly as it would have. In order:

1. a value is screened out unless it is non-null, starts with `{` and holds no
   control character (a newline would split a value in two for the line-delimited
   reader), nor, when the schema has a double field, a bare `-0`;
2. the rest is parsed as one line-delimited buffer; a parse that fails, returns
   another row count, or yields invalid UTF-8 is bisected until the failing values
   are isolated (or a bisection budget is spent: then the rest falls back);
3. rows with a required field null fall back (Spark flags them).

A differential property test (tests/unit/kafka/test_arrow_json_differential.py)
checks the contract on generated values: a row typed here equals Spark's row.

No Spark import: this runs inside Spark's Python workers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

SPARK_TYPES: dict[str, pa.DataType] = {
    "bigint": pa.int64(),
    "int": pa.int32(),
    "double": pa.float64(),
    "string": pa.string(),
    "boolean": pa.bool_(),
}
"""The Spark field types Arrow types like `from_json` does (by the differential test)."""

RAW_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")
"""The Kafka columns a fallback record keeps: what `parse_kafka` reads."""

MIN_PIECE = 16
"""Bisection stops at pieces this small: the whole piece falls back."""
MAX_PARSES = 256
"""Parses one block may spend bisecting; past it, what is left falls back."""

_CONTROL = r"[\x00-\x1f]"
_BARE_MINUS_ZERO = r"-0([^.eE0-9]|$)"


class ArrowParse(NamedTuple):
    """One block, split: `rows` typed by Arrow (the payload fields, then the Kafka
    coordinates `_topic, _partition, _offset, _timestamp`), `fallback` the raw records
    (`RAW_COLUMNS`) Spark must parse."""

    rows: pa.RecordBatch
    fallback: pa.RecordBatch


def payload_schema(fields: Sequence[tuple[str, str]]) -> pa.Schema | None:
    """The Arrow schema of a payload given as `(name, Spark simple type)` pairs, or None
    when a type is one this parser does not cover (timestamps, decimals, nested)."""
    out = []
    for name, kind in fields:
        t = SPARK_TYPES.get(kind)
        if t is None:
            return None
        out.append(pa.field(name, t))
    return pa.schema(out) if out else None


def _lines(values: pa.Array) -> pa.Buffer:
    """`values` (binary, no nulls) joined by newlines into one buffer, without Python
    per value."""
    text = pc.binary_join_element_wise(values, pa.scalar(b"", pa.binary()), b"\n")
    offsets = text.buffers()[1]
    data = text.buffers()[2]
    if data is None:  # every value empty: screened out before, but keep it total
        return pa.py_buffer(b"\n" * len(values))
    ends = pa.Array.from_buffers(pa.int32(), len(text) + 1, [None, offsets], offset=text.offset)
    lo, hi = ends[0].as_py(), ends[len(text)].as_py()
    return data.slice(lo, hi - lo)


def _screen(values: pa.Array, has_double: bool) -> pa.Array:
    """True for the values Arrow may parse (step 1 of the module doc)."""
    ok = pc.and_kleene(
        pc.starts_with(values, "{"), pc.invert(pc.match_substring_regex(values, _CONTROL))
    )
    if has_double:
        ok = pc.and_kleene(ok, pc.invert(pc.match_substring_regex(values, _BARE_MINUS_ZERO)))
    return pc.fill_null(ok, False)


class _Parser:
    def __init__(self, schema: pa.Schema, required: Sequence[str]) -> None:
        self.schema = schema
        self.required = tuple(required)
        self.has_double = any(pa.types.is_floating(f.type) for f in schema)
        self.options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")

    def parse(self, values: pa.Array) -> pa.Table | None:
        """The typed rows of `values`, or None if Arrow refuses or disagrees on the count."""
        buf = _lines(values)
        read = pj.ReadOptions(use_threads=False, block_size=max(1 << 20, buf.size + 1))
        try:
            t = pj.read_json(pa.BufferReader(buf), read_options=read, parse_options=self.options)
            if t.num_rows != len(values):
                return None  # two objects in one value, say
            t = t.select(self.schema.names).combine_chunks()
            t.validate(full=True)  # Arrow does not check UTF-8 inside strings
        except (pa.ArrowException, ValueError):
            return None
        return t

    def split(
        self, values: pa.Array, min_piece: int, budget: int
    ) -> tuple[list[tuple[int, pa.Table]], list[tuple[int, int]]]:
        """Parsed pieces `(start, rows)` and refused pieces `(start, end)` of `values`, by
        bisection (module doc, step 2)."""
        parsed: list[tuple[int, pa.Table]] = []
        refused: list[tuple[int, int]] = []
        todo = [(0, len(values))]
        while todo:
            lo, hi = todo.pop()
            if hi <= lo:
                continue
            if budget <= 0:
                refused.append((lo, hi))
                continue
            budget -= 1
            t = self.parse(values.slice(lo, hi - lo))
            if t is not None:
                parsed.append((lo, t))
            elif hi - lo <= min_piece:
                refused.append((lo, hi))
            else:
                mid = (lo + hi) // 2
                todo += [(mid, hi), (lo, mid)]  # the lower half first
        return parsed, refused


_PARSERS: dict[tuple, _Parser] = {}


def _parser(schema: pa.Schema, required: Sequence[str]) -> _Parser:
    key = (schema.to_string(), tuple(required))
    p = _PARSERS.get(key)
    if p is None:
        p = _PARSERS[key] = _Parser(schema, required)
    return p


def split_block(
    batch: pa.RecordBatch,
    schema: pa.Schema,
    required: Sequence[str] = (),
    *,
    min_piece: int = MIN_PIECE,
    max_parses: int = MAX_PARSES,
) -> ArrowParse:
    """Type the values of one batch of Kafka records (`RAW_COLUMNS` at least) with
    `schema` where Arrow agrees with Spark, and return the other records raw.
    `min_piece`, `max_parses`: the bisection's limits (module doc, step 2)."""
    p = _parser(schema, required)
    values = batch.column("value")
    if not pa.types.is_binary(values.type):
        values = values.cast(pa.binary())
    ok = _screen(values, p.has_double)
    idx = pc.indices_nonzero(ok)
    good_idx = [idx.slice(0, 0)]
    tables = []
    if len(idx):
        screened = values.take(idx)
        parsed, _ = p.split(screened, min_piece, max_parses)
        for lo, t in parsed:
            tables.append(t)
            good_idx.append(idx.slice(lo, t.num_rows))
    kept = pa.concat_arrays(good_idx)
    if tables:
        typed = pa.concat_tables(tables).combine_chunks()
    else:
        typed = schema.empty_table()
    if p.required and typed.num_rows:
        bad = None
        for name in p.required:
            null = pc.is_null(typed.column(name))
            bad = null if bad is None else pc.or_(bad, null)
        keep = pc.invert(bad)
        if isinstance(keep, pa.ChunkedArray):
            keep = keep.combine_chunks()
        typed = typed.filter(keep)
        kept = kept.filter(keep)
    # Back to record order, so that files and fallback both follow the offsets.
    order = pc.sort_indices(kept)
    kept = kept.take(order)
    typed = typed.take(order)
    coords = batch.select(["topic", "partition", "offset", "timestamp"]).take(kept)
    rows = pa.RecordBatch.from_arrays(
        [*(typed.column(i).combine_chunks() for i in range(typed.num_columns)), *coords.columns],
        names=[*schema.names, "_topic", "_partition", "_offset", "_timestamp"],
    )
    mask = _missing(kept, batch.num_rows)
    fallback = batch.select(list(RAW_COLUMNS)).filter(mask)
    return ArrowParse(rows, fallback)


def _missing(kept: pa.Array, n: int) -> pa.Array:
    """A mask of length `n`, true where the index is not in `kept` (sorted)."""
    import numpy as np

    mask = np.ones(n, dtype=bool)
    mask[kept.to_numpy(zero_copy_only=False)] = False
    return pa.array(mask)
