"""Parse Kafka JSON values in bulk with Arrow, where Arrow's result is Spark's.

`parse_kafka` types JSON values with Spark's `from_json`: every record becomes a JVM
row. For the common case (a flat object of integers, numbers, strings, booleans and
timestamps),
Arrow's JSON reader types a whole block of values at once in C++, several times
cheaper (docs/benchmarks.md, "Kafka → Delta ingest"). But the two parsers disagree on
some inputs: Arrow refuses what Spark accepts (a number in a string field, single
quotes), and accepts a few things Spark would type differently (`-0` in a double
field is -0.0 for Arrow and 0.0 for Spark; the non-numeric numbers `NaN`, `Inf`,
whose spellings the two parsers accept differently) or not at all (two objects in
one value, invalid UTF-8 inside a string).

So `split_block` only keeps the rows for which both parsers agree, and hands every
other record back untouched (`ArrowParse.fallback`), for Spark's parse to type or
quarantine exactly as it would have. In order:

0. the flat parser (`_flatjson`, C, where built) types the values that are one flat
   object of plain members (its module doc lists exactly which), in one pass and
   several times cheaper than Arrow's reader; it declines everything else, and the
   steps below take what it declined. Its rows equal Arrow's on what it accepts
   (the differential test below checks both against each other);
1. a value is screened out unless it is non-null, starts with `{`, ends with `}` (a
   value cut off, the commonest malformed record, costs no failed parse) and holds no
   control character (a newline would split a value in two for the line-delimited
   reader), nor, when the schema has a double field, a bare `-0`, nor `NaN` or
   `Inf` anywhere;
2. the rest is parsed as one line-delimited buffer; when the parse fails naming a row
   (Arrow's `... in row N`), that value falls back and the values before and after it
   are parsed again, so a block with k malformed values costs about k + 1 parses, not
   k bisections; a parse that fails without a row, returns another row count, or
   yields invalid UTF-8 is bisected until the failing values are isolated (or a
   parse budget is spent: then the rest falls back);
3. rows with a required field null fall back (Spark flags them), and so do rows with a
   timestamp not in the strict form `_ISO_INSTANT` (an invalid date in that form fails
   the piece's conversion and is bisected out like a parse error).

Known bad records: with `explain=True`, three kinds of record that Spark's parse would
quarantine are not handed back, since their bad row is known: a null value ("value is
null"), a value the flat parser found cut off (it starts with `{` and ends inside the
object after a prefix the flat parser accepts: no JSON parser takes it, "invalid
JSON"), and a row the flat parser typed, with members of the schema only, without a
required field ("missing required field `name`", one per field in the schema's
order). They come back in `ArrowParse.bad` with that reason (`_error`), raw. A row
with other members is left to Spark: its VARIANT parse, which explains bad rows,
refuses a member repeated, and then says "invalid JSON".

A differential property test (tests/integration/landing/test_arrow_json.py)
checks the contract on generated values: a row typed here equals Spark's row, and a
record explained here is bad for Spark with the same reason.

No Spark import: this runs inside Spark's Python workers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

# The module, not the package: `streams.kafka` imports Spark, and this module must not.
from streams.kafka.columns import COORDINATES, KAFKA_COLUMNS
from streams.kafka.reasons import INVALID_JSON, NULL_VALUE, missing_required

try:
    from streams.landing import _flatjson
except ImportError:  # built by setup.py where a C compiler was found
    _flatjson = None

SPARK_TYPES: dict[str, pa.DataType] = {
    "bigint": pa.int64(),
    "int": pa.int32(),
    "double": pa.float64(),
    "string": pa.string(),
    "boolean": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}
"""The Spark field types Arrow types like `from_json` does (by the differential test).
A timestamp is read as a string and converted only in the strict form `_ISO_INSTANT`
(an ISO 8601 instant with an explicit offset): Spark reads other forms too, and reads
a bare date-time in the session's time zone, so those go back to Spark."""

MIN_PIECE = 16
"""Bisection stops at pieces this small: the whole piece falls back."""
MAX_PARSES = 256
"""Parses one block may spend bisecting; past it, what is left falls back."""

_ISO_INSTANT = (
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?"
    r"(Z|[+-](0\d|1[0-7]):[0-5]\d|[+-]18:00)$"
)
"""Spark refuses offsets beyond ±18:00, Arrow does not; Arrow refuses more than six
digits of fraction, Spark truncates them."""
_BARE_MINUS_ZERO = r"-0([^.eE0-9]|$)"
_NON_NUMERIC = (b"NaN", b"Inf")
"""Found anywhere in a value, inside a string too (where it only sends the value back)."""
_ERROR_ROW = re.compile(r"JSON parse error: .* in row (\d+)$")
"""Arrow's parse error names the row (in the buffer, from 0) it failed on."""


class ArrowParse(NamedTuple):
    """One block, split: `rows` typed by Arrow (the payload fields, then the Kafka
    coordinates `_topic, _partition, _offset, _timestamp`), `fallback` the raw records
    (`KAFKA_COLUMNS`) Spark must parse, and with `split_block(explain=True)` `bad`: the
    raw records whose `parse_kafka` outcome is known without Spark, each a bad row with
    its `_error` (`BAD_COLUMNS`; module doc, "Known bad records")."""

    rows: pa.RecordBatch
    fallback: pa.RecordBatch
    bad: pa.RecordBatch | None = None


BAD_COLUMNS = (*KAFKA_COLUMNS, "_error")
"""The columns of `ArrowParse.bad`: the raw record and `parse_kafka`'s reason."""


def payload_schema(fields: Sequence[tuple[str, str]]) -> pa.Schema | None:
    """The Arrow schema of a payload given as `(name, Spark simple type)` pairs, or None
    when a type is one this parser does not cover (dates, decimals, nested, ...)."""
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
    ok = pc.and_kleene(pc.starts_with(values, "{"), pc.ends_with(values, "}"))
    ok = np.array(pc.fill_null(ok, False).to_numpy(zero_copy_only=False), dtype=bool)
    data = values.buffers()[2]
    if data is not None and len(values):
        # On the bytes with numpy: a regex or substring search per value costs ~15 times
        # more (0.3 s per 1M values of 183 B, against 0.02).
        offsets = np.frombuffer(values.buffers()[1], dtype=np.int32)
        offsets = offsets[values.offset : values.offset + len(values) + 1]
        raw = np.frombuffer(data, dtype=np.uint8)[: offsets[-1]]
        hits = [np.flatnonzero(raw < 0x20)]
        if has_double:
            head = raw[:-2]
            first = np.flatnonzero((head == _NON_NUMERIC[0][0]) | (head == _NON_NUMERIC[1][0]))
            for word in _NON_NUMERIC:
                at = first[raw[first] == word[0]]
                for k in (1, 2):
                    at = at[raw[at + k] == word[k]]
                hits.append(at)
        found = np.concatenate(hits)
        found = found[found >= offsets[0]]
        if len(found):
            ok[np.searchsorted(offsets, found, side="right") - 1] = False
    out = pa.array(ok)
    if has_double:
        out = pc.and_(out, pc.invert(pc.match_substring_regex(values, _BARE_MINUS_ZERO)))
    return pc.fill_null(out, False)


def _flat_kinds() -> dict[pa.DataType, int]:
    if _flatjson is None:
        return {}
    f = _flatjson
    return {
        pa.int64(): f.INT64,
        pa.int32(): f.INT32,
        pa.float64(): f.DOUBLE,
        pa.string(): f.STRING,
        pa.bool_(): f.BOOL,
        pa.timestamp("us", tz="UTC"): f.TEXT,
    }


class _Parser:
    def __init__(self, schema: pa.Schema, required: Sequence[str], flat: bool = True) -> None:
        self.schema = schema
        self.required = tuple(required)
        self.has_double = any(pa.types.is_floating(f.type) for f in schema)
        self.timestamps = [f.name for f in schema if pa.types.is_timestamp(f.type)]
        read = pa.schema(
            [pa.field(f.name, pa.string()) if f.name in self.timestamps else f for f in schema]
        )
        self.read = read
        self.options = pj.ParseOptions(explicit_schema=read, unexpected_field_behavior="ignore")
        kinds = _flat_kinds()
        self.flat = (
            [(f.name.encode(), kinds[f.type]) for f in schema]
            if flat and all(f.type in kinds for f in schema)
            else None
        )

    def parse_flat(
        self, values: pa.Array
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, pa.Table, pa.Array | None] | None:
        """The values the flat parser (`_flatjson`) types: a mask of them, a mask of the
        values it found cut off (an object the input ends inside), a mask over their
        rows of those with members of the schema only, their rows, and the mask of those
        that must still fall back (as `parse`); None when it is not built or a timestamp
        does not convert (the Arrow path then takes them all)."""
        if self.flat is None or not len(values):
            return None
        valid, offsets, data = values.buffers()
        typed, columns = _flatjson.parse(
            offsets, data if data is not None else b"", values.offset, len(values), self.flat, valid
        )
        verdict = np.frombuffer(typed, dtype=np.uint8)
        mask, cut = (verdict & 1) == 1, verdict == 2
        n = int(np.count_nonzero(mask))
        arrays = [
            pa.Array.from_buffers(
                f.type,
                n,
                [
                    None if v is None else pa.py_buffer(v),
                    pa.py_buffer(x),
                    *([] if d is None else [pa.py_buffer(d)]),
                ],
            )
            for f, (v, x, d) in zip(self.read, columns, strict=True)
        ]
        try:
            t, reject = self.convert(pa.Table.from_arrays(arrays, schema=self.read))
        except (pa.ArrowException, ValueError):
            return None
        return mask, cut, verdict[mask] == 1, t, reject

    def convert(self, t: pa.Table) -> tuple[pa.Table, pa.Array | None]:
        """The timestamps of `t` (read as strings) converted where they are in the strict
        form, and a mask of the rows with one that is not (None: none). Raises on a
        date that does not exist (Feb 30, hour 24)."""
        reject = None
        for name in self.timestamps:
            text = t.column(name)
            strict = pc.match_substring_regex(text, _ISO_INSTANT)
            bad = pc.invert(pc.fill_null(strict, True))
            reject = bad if reject is None else pc.or_(reject, bad)
            kept = pc.if_else(strict, text, pa.scalar(None, pa.string()))
            t = t.set_column(
                t.schema.get_field_index(name), name, kept.cast(self.schema.field(name).type)
            )
        if reject is not None:
            reject = reject.combine_chunks() if isinstance(reject, pa.ChunkedArray) else reject
            if not pc.any(reject).as_py():
                reject = None
        return t, reject

    def parse(self, values: pa.Array) -> tuple[pa.Table, pa.Array | None] | int | None:
        """The typed rows of `values` and a mask of those that must still fall back (a
        timestamp not in the strict form; None: none); if Arrow refuses the piece, the
        row its parse error names (`_ERROR_ROW`), else None (a refusal that names no
        row, or another row count)."""
        buf = _lines(values)
        read = pj.ReadOptions(use_threads=False, block_size=max(1 << 20, buf.size + 1))
        try:
            t = pj.read_json(pa.BufferReader(buf), read_options=read, parse_options=self.options)
        except pa.ArrowInvalid as e:
            named = _ERROR_ROW.search(str(e))
            return int(named.group(1)) if named else None
        try:
            if t.num_rows != len(values):
                return None  # two objects in one value, say
            t = t.select(self.schema.names).combine_chunks()
            t.validate(full=True)  # Arrow does not check UTF-8 inside strings
            return self.convert(t)
        except (pa.ArrowException, ValueError):
            return None

    def split(
        self, values: pa.Array, min_piece: int, budget: int
    ) -> list[tuple[int, pa.Table, pa.Array | None]]:
        """The parsed pieces `(start, rows, reject mask)` of `values`, by bisection
        (module doc, step 2); what they do not cover falls back."""
        parsed: list[tuple[int, pa.Table, pa.Array | None]] = []
        todo = [(0, len(values))]
        while todo:
            lo, hi = todo.pop()
            if hi <= lo or budget <= 0:
                continue
            budget -= 1
            out = self.parse(values.slice(lo, hi - lo))
            if isinstance(out, tuple):
                parsed.append((lo, *out))
            elif out is not None and 0 <= out < hi - lo:
                # The row Arrow's error names falls back; the rows around it are parsed
                # again (if the name is wrong, those parses fail and bisect as usual).
                todo += [(lo + out + 1, hi), (lo, lo + out)]
            elif hi - lo > min_piece:
                mid = (lo + hi) // 2
                todo += [(mid, hi), (lo, mid)]  # the lower half first
        return parsed


_PARSERS: dict[tuple, _Parser] = {}


def _parser(schema: pa.Schema, required: Sequence[str], flat: bool) -> _Parser:
    key = (schema.to_string(), tuple(required), flat)
    p = _PARSERS.get(key)
    if p is None:
        p = _PARSERS[key] = _Parser(schema, required, flat)
    return p


def split_block(
    batch: pa.RecordBatch,
    schema: pa.Schema,
    required: Sequence[str] = (),
    *,
    min_piece: int = MIN_PIECE,
    max_parses: int = MAX_PARSES,
    flat: bool = True,
    explain: bool = False,
) -> ArrowParse:
    """Type the values of one batch of Kafka records (`KAFKA_COLUMNS` at least) with
    `schema` where Arrow agrees with Spark, and return the other records raw.
    `min_piece`, `max_parses`: the bisection's limits (module doc, step 2); `flat`:
    whether the flat parser (step 0) may type values first; `explain`: whether the
    records whose bad row is known (module doc, "Known bad records") come back in
    `ArrowParse.bad` instead of the fallback."""
    p = _parser(schema, required, flat)
    values = batch.column("value")
    if not pa.types.is_binary(values.type):
        values = values.cast(pa.binary())
    good_idx = [pa.array([], pa.uint64())]
    tables = []
    rejects = []
    rejected = False  # any row of a piece to send back (a timestamp not in strict form)
    rest = None  # indices of the values the flat parser left, None: all
    known: list[tuple[np.ndarray, pa.Array]] = []  # (record indices, reasons) of bad records
    if explain and values.null_count:
        nulls = np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))
        known.append((nulls, pa.repeat(pa.scalar(NULL_VALUE), len(nulls))))
    plain = None  # over the first rows of `typed`, the flat parser's: those `_plain`
    fast = p.parse_flat(values)
    if fast is not None:
        mask, cut, schema_only, t, reject = fast
        if t.num_rows:
            tables.append(t)
            at = np.flatnonzero(mask)
            good_idx.append(pa.array(at.astype(np.uint64)))
            rejects.append(pa.repeat(pa.scalar(False), t.num_rows) if reject is None else reject)
            rejected = reject is not None
            plain = _plain(values, at, schema_only) if explain else None
        if explain and cut.any():
            at = np.flatnonzero(cut)
            known.append((at, pa.repeat(pa.scalar(INVALID_JSON), len(at))))
            mask = mask | cut
        rest = pa.array(np.flatnonzero(~mask).astype(np.uint64))
    if rest is None:
        ok = _screen(values, p.has_double)
        idx = pc.indices_nonzero(ok)
    else:
        ok = _screen(values.take(rest), p.has_double) if len(rest) else pa.array([], pa.bool_())
        idx = rest.filter(ok)
    if len(idx):
        screened = values.take(idx)
        for lo, t, reject in p.split(screened, min_piece, max_parses):
            tables.append(t)
            good_idx.append(idx.slice(lo, t.num_rows))
            rejects.append(pa.repeat(pa.scalar(False), t.num_rows) if reject is None else reject)
            rejected = rejected or reject is not None
    kept = pa.concat_arrays(good_idx)
    if tables:
        typed = pa.concat_tables(tables).combine_chunks()
    else:
        typed = schema.empty_table()
    # The masks only matter when a piece rejected a row: otherwise no filter per block.
    reject = pa.concat_arrays(rejects) if rejected else None
    if typed.num_rows and (p.required or reject is not None):
        typed, kept = _without_unsure(typed, kept, reject, p.required, plain, known)
    rows, kept = _in_record_order(batch, schema, typed, kept)
    mask = _missing(kept, batch.num_rows)
    raw = batch.select(list(KAFKA_COLUMNS))
    if not explain:
        return ArrowParse(rows, raw.filter(mask))
    where = np.concatenate([a.astype(np.int64) for a, _ in known] or [np.array([], np.int64)])
    mask[where] = False
    return ArrowParse(rows, raw.filter(mask), _known_bad(raw, where, known))


def _in_record_order(
    batch: pa.RecordBatch, schema: pa.Schema, typed: pa.Table, kept: pa.Array
) -> tuple[pa.RecordBatch, pa.Array]:
    """The typed rows with their coordinates, and their record indices, in record order,
    so that files and fallback both follow the offsets (the pieces come in order; only
    rows of both parsers interleave)."""
    at = kept.to_numpy(zero_copy_only=False)
    if len(at) > 1 and not (at[1:] > at[:-1]).all():
        order = pc.sort_indices(kept)
        kept = kept.take(order)
        typed = typed.take(order)
    coords = batch.select([c.removeprefix("_") for c in COORDINATES]).take(kept)
    rows = pa.RecordBatch.from_arrays(
        [*(_one_array(typed.column(i)) for i in range(typed.num_columns)), *coords.columns],
        names=[*schema.names, *COORDINATES],
    )
    return rows, kept


def _one_array(column: pa.ChunkedArray) -> pa.Array:
    """`column` as one array: its only chunk as it is (`combine_chunks` copies even
    that), else its chunks concatenated."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


_PLAIN_BYTES = 4 << 20
"""A value longer than this is never `_plain`: Spark's VARIANT, which explains bad rows,
holds at most 16 MiB, which a flat object of this size cannot exceed."""


def _plain(values: pa.Array, at: np.ndarray, schema_only: np.ndarray) -> np.ndarray:
    """Over the values at `at` (the flat parser typed them), true for those Spark's
    parse can only find fault with for a missing field: members of the schema only
    (no member twice, then, which Spark's VARIANT refuses), and not too long."""
    offsets = np.frombuffer(values.buffers()[1], np.int32)[values.offset :]
    sizes = offsets[at + 1] - offsets[at]
    return schema_only & (sizes <= _PLAIN_BYTES)


def _without_unsure(
    typed: pa.Table,
    kept: pa.Array,
    reject: pa.Array | None,
    required: Sequence[str],
    plain: np.ndarray | None,
    known: list[tuple[np.ndarray, pa.Array]],
) -> tuple[pa.Table, pa.Array]:
    """`typed` and `kept` without the rows `reject` sends back or with a required field
    null (module doc, step 3); of the latter, those `plain` marks (over the first rows)
    join `known` with their reasons."""
    missing = None  # a required field null
    for name in required:
        null = pc.is_null(typed.column(name))
        missing = null if missing is None else pc.or_(missing, null)
    if missing is not None and plain is not None and plain.any():
        known += _missing_required(typed, kept, plain, missing, reject, required)
    bad = reject
    if missing is not None:
        bad = missing if bad is None else pc.or_(bad, missing)
    assert bad is not None  # the caller has a reject mask or required fields
    keep = pc.invert(bad)
    if isinstance(keep, pa.ChunkedArray):
        keep = keep.combine_chunks()
    return typed.filter(keep), kept.filter(keep)


def _missing_required(
    typed: pa.Table,
    kept: pa.Array,
    plain: np.ndarray,
    missing: pa.Array,
    reject: pa.Array | None,
    required: Sequence[str],
) -> list[tuple[np.ndarray, pa.Array]]:
    """The (record indices, reasons) of the rows `plain` marks (over the first rows of
    `typed`) with a required field null, unless `reject` sends them back. Such a row is
    a valid JSON object of the schema's fields, so its only reason on Spark's path is
    the missing fields, in the schema's order."""
    first = np.zeros(typed.num_rows, dtype=bool)
    first[: len(plain)] = plain
    sure = pc.and_(missing, pa.array(first))
    if reject is not None:
        sure = pc.and_not(sure, reject)
    if not pc.any(sure).as_py():
        return []
    rows = typed.filter(sure)
    none = pa.scalar(None, pa.string())
    why = pc.binary_join_element_wise(
        *[
            pc.if_else(pc.is_null(rows.column(f)), pa.scalar(missing_required(f)), none)
            for f in typed.column_names
            if f in required
        ],
        "; ",
        null_handling="skip",
    )
    if isinstance(why, pa.ChunkedArray):
        why = why.combine_chunks()
    return [(kept.filter(sure).to_numpy(zero_copy_only=False), why)]


def _known_bad(
    raw: pa.RecordBatch, where: np.ndarray, known: list[tuple[np.ndarray, pa.Array]]
) -> pa.RecordBatch:
    """The records of `raw` at `where` (the indices of `known`, concatenated) with their
    reasons, in record order (`BAD_COLUMNS`)."""
    if not known:
        return pa.RecordBatch.from_arrays(
            [*raw.slice(0, 0).columns, pa.array([], pa.string())], names=list(BAD_COLUMNS)
        )
    why = pa.concat_arrays([w.cast(pa.string()) for _, w in known])
    order = np.argsort(where, kind="stable")
    picked = raw.take(pa.array(where[order], pa.int64()))
    return pa.RecordBatch.from_arrays(
        [*picked.columns, why.take(pa.array(order))], names=list(BAD_COLUMNS)
    )


def _missing(kept: pa.Array, n: int) -> np.ndarray:
    """A mask of length `n`, true where the index is not in `kept` (sorted)."""
    mask = np.ones(n, dtype=bool)
    mask[kept.to_numpy(zero_copy_only=False)] = False
    return mask
