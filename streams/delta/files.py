"""The executor side of an append: write a task's rows as Parquet files with Delta stats.

`file_writer(...)` returns the function given to `DataFrame.mapInArrow`. Each task
writes its rows (split by partition values into hive-style directories) under unique
names and returns one row per file; the driver commits them. `root` is a local path or
a URI: the tasks write through `streams.storage`'s file systems. A file of an attempt
that never commits is never referenced by the log (`remove_orphans` deletes it).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import streams.storage as storage
from streams._worker_gc import freeze_imports

FILES_SCHEMA = (
    "path string, size long, partition_values string, stats string, modification_time long"
)
"""What `mapInArrow` returns: one row per written file."""

STAGING_DIR = "_warehouse_staging"
"""Under a table root: one subdirectory per Spark-written attempt (`_spark_files`)."""

CODEC = "zstd"
ZSTD_LEVEL = 1
"""How data files are compressed unless the session says otherwise. Measured on 1M rows of
the ingest benchmark's shape with Spark's writer (docs/benchmarks.md, "Parquet settings"; docs/decisions/0006):
zstd level 1 halves the files of snappy (Spark's default) and costs less CPU with
random text as well as with repetitive; level 3 compresses no smaller there."""

STRING_STATS_MAX = 32
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


def partition_value(value: Any) -> str | None:
    """A partition value as the Delta protocol serializes it in `partitionValues`."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def _escape(value: str | None) -> str:
    if value is None:
        return HIVE_NULL
    return "".join(c if c in _SAFE else "".join(f"%{b:02X}" for b in c.encode()) for c in value)


def _iso(value: dt.datetime, *, round_up: bool) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    if round_up and value.microsecond % 1000:
        # Stats keep milliseconds: a max truncated down would hide the file from a
        # filter on its own largest value.
        value += dt.timedelta(microseconds=1000 - value.microsecond % 1000)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def _stat_kind(t: pa.DataType) -> str | None:
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return "number"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_boolean(t) or pa.types.is_decimal(t) or pa.types.is_binary(t):
        return "none"
    return None  # nested: no stats at all


class _Stats:
    """Running numRecords/min/max/nullCount of one file, merged batch by batch."""

    def __init__(self, schema: pa.Schema) -> None:
        self.kinds = {f.name: _stat_kind(f.type) for f in schema}
        self.rows = 0
        self.nulls: dict[str, int] = {n: 0 for n, k in self.kinds.items() if k is not None}
        self.mins: dict[str, Any] = {}
        self.maxs: dict[str, Any] = {}
        self.dropped: set[str] = set()

    def update(self, batch: pa.RecordBatch | pa.Table) -> None:
        self.rows += batch.num_rows
        for name in self.bounded(batch):
            bounds = self.computed(name, batch.column(name))
            if bounds is not None:
                self.bound(name, *bounds)

    def bounded(self, batch: pa.RecordBatch | pa.Table) -> list[str]:
        """Counts the nulls of `batch`'s columns; the columns of it that have bounds to
        merge (non-null values, a kind with min/max, not dropped)."""
        names = []
        for name, kind in self.kinds.items():
            if kind is None:
                continue
            col = batch.column(name)
            self.nulls[name] += col.null_count
            if kind == "none" or name in self.dropped or col.null_count == len(col):
                continue
            names.append(name)
        return names

    def computed(self, name: str, col: pa.Array | pa.ChunkedArray) -> tuple[Any, Any] | None:
        """The min and max of `col`'s non-null values; None, and `name` dropped, when a
        floating column holds NaN (it orders nothing)."""
        if self.kinds[name] == "number" and pa.types.is_floating(col.type):
            if pc.any(pc.is_nan(col)).as_py():
                self.dropped.add(name)
                return None
        mm = pc.min_max(col)
        return mm["min"].as_py(), mm["max"].as_py()

    def bound(self, name: str, lo: Any, hi: Any) -> None:
        """Widen `name`'s min/max by the bounds of some of its non-null values."""
        if self.kinds[name] == "string" and (
            len(lo) > STRING_STATS_MAX or len(hi) > STRING_STATS_MAX
        ):
            self.dropped.add(name)
            return
        if name not in self.mins or lo < self.mins[name]:
            self.mins[name] = lo
        if name not in self.maxs or hi > self.maxs[name]:
            self.maxs[name] = hi

    def to_json(self) -> str:
        def fmt(name: str, v: Any, *, up: bool) -> Any:
            kind = self.kinds[name]
            if kind == "timestamp":
                return _iso(v, round_up=up)
            if kind == "date":
                return v.isoformat()
            return v

        keep = [n for n in self.mins if n not in self.dropped]
        return json.dumps(
            {
                "numRecords": self.rows,
                "minValues": {n: fmt(n, self.mins[n], up=False) for n in keep},
                "maxValues": {n: fmt(n, self.maxs[n], up=True) for n in keep},
                "nullCount": self.nulls,
            }
        )


WRITER_STATS_MAX = 4096
"""The longest min or max (in bytes) Arrow's Parquet writer keeps in a column chunk's
statistics (its `max_statistics_size`); it leaves a longer bound out rather than cut it."""


def _exact_in_footer(f: pa.Field) -> bool:
    """Whether Arrow's Parquet writer keeps `f`'s min and max as `pc.min_max` finds them:
    integers, `date32`, ms and us timestamps, strings. Floats are not among them (the
    writer skips NaN and writes a zero bound as -0.0 or +0.0); `date64` and second
    timestamps the writer converts to another unit, nanoseconds come back as pandas
    objects, and a top-level name with a dot can be a nested column's leaf path: those
    are computed from the rows."""
    t = f.type
    return "." not in f.name and (
        pa.types.is_integer(t)
        or pa.types.is_date32(t)
        or (pa.types.is_timestamp(t) and t.unit in ("ms", "us"))
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
    )


class _FooterStats(_Stats):
    """`_Stats` of a file `pq.ParquetWriter` writes, `update`d with each table it writes:
    the bounds of the columns `_exact_in_footer` are read from the file's footer once it is
    closed (`add_footer`) instead of computed from the rows, the others' computed. The
    statistics are the same JSON as `_Stats` gives for the same tables; finding a string
    column's bounds costs `pc.min_max` a comparison per value, and the writer has made
    those comparisons already. One file's writer thread only."""

    def __init__(self, schema: pa.Schema) -> None:
        super().__init__(schema)
        self.footer = {f.name for f in schema if _exact_in_footer(f)}
        # Per table written: its rows, and the bounds it adds in `update`'s column order
        # (None for a column whose bounds are in the footer): that order is the order
        # the columns first appear in `minValues`.
        self.tables: list[tuple[int, list[tuple[str, tuple[Any, Any] | None]]]] = []

    def update(self, batch: pa.RecordBatch | pa.Table) -> None:
        self.rows += batch.num_rows
        bounds = []
        for name in self.bounded(batch):
            if name in self.footer:
                bounds.append((name, None))
            elif (found := self.computed(name, batch.column(name))) is not None:
                bounds.append((name, found))
        self.tables.append((batch.num_rows, bounds))

    def add_footer(
        self, meta: pq.FileMetaData, read: Callable[[list[int], str], pa.ChunkedArray]
    ) -> None:
        """Merges the bounds `update` noted, in its order, with those of the footer's
        columns taken from `meta`. A column chunk with values but no bounds in the
        footer: a string column written as one row group left out a bound longer than
        `WRITER_STATS_MAX`, so longer than `STRING_STATS_MAX` too, and is dropped; any
        other is computed from the column `read(row groups, name)` reads back."""
        leaf = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
        group = 0
        for rows, bounds in self.tables:
            groups = []  # the row groups `write_table` made of this table
            written = 0
            while written < rows:
                groups.append(group)
                written += meta.row_group(group).num_rows
                group += 1
            for name, found in bounds:
                if name in self.dropped:
                    continue
                if found is None:
                    found = _footer_bounds(meta, groups, leaf[name])
                if found is None and self.kinds[name] == "string" and len(groups) == 1:
                    self.dropped.add(name)
                    continue
                if found is None:
                    mm = pc.min_max(read(groups, name))
                    found = mm["min"].as_py(), mm["max"].as_py()
                self.bound(name, *found)


def _footer_bounds(meta: pq.FileMetaData, groups: list[int], column: int) -> tuple[Any, Any] | None:
    """The min and max of leaf `column` over row groups `groups` by their statistics;
    None where a chunk holding values has no bounds."""
    lows, highs = [], []
    for g in groups:
        st = meta.row_group(g).column(column).statistics
        if st is not None and st.has_min_max:
            lows.append(st.min)
            highs.append(st.max)
        elif st is None or not st.has_null_count or st.null_count != meta.row_group(g).num_rows:
            return None
    return (min(lows), max(highs)) if lows else None


def _leaves(name: str, t: pa.DataType) -> list[tuple[str, pa.DataType]]:
    """The Parquet column paths of an Arrow field, as `use_dictionary` names them
    (`headers.list.element.key`), with their types: a nested column's own name matches
    none of them."""
    if pa.types.is_struct(t):
        return [leaf for f in t for leaf in _leaves(f"{name}.{f.name}", f.type)]
    if pa.types.is_map(t):
        return [
            *_leaves(f"{name}.key_value.key", t.key_type),
            *_leaves(f"{name}.key_value.value", t.item_type),
        ]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _leaves(f"{name}.list.element", t.value_type)
    return [(name, t)]


def _is_text(t: pa.DataType) -> bool:
    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_dictionary(t)
    )


def dictionary_columns(schema: pa.Schema, unique_columns: Sequence[str] = ()) -> list[str]:
    """The leaf paths written with a dictionary: the text ones (strings, binaries), except
    those of `unique_columns`. A dictionary pays where values repeat and are long; a
    number or a timestamp is as small plain once compressed, and Arrow's writer hashes
    every value of a dictionary column, which costs the Arrow path's tasks more CPU than
    the rest of the write (docs/decisions/0007)."""
    return [
        path
        for f in schema
        if f.name not in unique_columns
        for path, t in _leaves(f.name, f.type)
        if _is_text(t)
    ]


ROW_GROUP_BYTES = 32 << 20
"""How many bytes of Arrow rows a file buffers before it writes them as one row group
(and at most what a task's open files buffer together). A row group per batch the
task is handed (the Kafka reader's 10,000 records) costs the writer a dictionary and
column chunks per batch, and readers a row group's overhead per batch; the writer
still closes a row group at `ROW_GROUP_ROWS` rows."""
ROW_GROUP_ROWS = 1 << 20


class _OpenFile:
    def __init__(
        self,
        root: str,
        rel: str,
        schema: pa.Schema,
        values: dict[str, str | None],
        unique_columns: Sequence[str] = (),
    ):
        self.rel = rel
        fs, self.full = storage.current().filesystem(storage.join(root, rel))
        if storage.is_local(root):
            os.makedirs(os.path.dirname(self.full), exist_ok=True)
        self.fs = fs
        self.sink = fs.open_output_stream(self.full)
        self.values = values
        self.footers: list[pq.FileMetaData] = []
        self.writer = pq.ParquetWriter(
            self.sink,
            schema,
            compression=CODEC,
            compression_level=ZSTD_LEVEL,
            use_dictionary=dictionary_columns(schema, unique_columns),
            metadata_collector=self.footers,
        )
        self.stats = _FooterStats(schema)
        self.pending: list[pa.RecordBatch] = []
        self.pending_bytes = 0
        self.pending_rows = 0

    def write(self, batch: pa.RecordBatch) -> int:
        """Buffers `batch`, writing a row group when the buffer is full; the bytes the
        buffer grew by (negative: it was written)."""
        if not batch.num_rows:
            return 0
        before = self.pending_bytes
        self.pending.append(batch)
        self.pending_bytes += batch.nbytes
        self.pending_rows += batch.num_rows
        if self.pending_bytes >= ROW_GROUP_BYTES or self.pending_rows >= ROW_GROUP_ROWS:
            self.flush()
        return self.pending_bytes - before

    def flush(self) -> None:
        """Writes the buffered rows as one row group."""
        if not self.pending:
            return
        rows = pa.Table.from_batches(self.pending)
        self.writer.write_table(rows, row_group_size=ROW_GROUP_ROWS)
        self.stats.update(rows)
        self.pending.clear()
        self.pending_bytes = 0
        self.pending_rows = 0

    def close(self) -> tuple[str, int, str, str, int]:
        self.flush()
        self.writer.close()
        size = self.sink.tell()
        self.sink.close()
        self.stats.add_footer(self.footers[0], self._read)
        return (
            self.rel,  # delta-rs URI-encodes the path it writes to the log
            size,
            json.dumps(self.values),
            self.stats.to_json(),
            int(time.time() * 1000),
        )

    def _read(self, groups: list[int], name: str) -> pa.ChunkedArray:
        """Column `name` of row groups `groups`, read back from the closed file."""
        with self.fs.open_input_file(self.full) as f:
            return pq.ParquetFile(f).read_row_groups(groups, columns=[name]).column(0)


def _split(batch: pa.RecordBatch, partition_by: Sequence[str]):
    """Yield (partition values, rows without the partition columns) of one batch."""
    data_cols = [n for n in batch.schema.names if n not in partition_by]
    if not partition_by:
        yield {}, batch
        return
    table = pa.Table.from_batches([batch])
    combos = table.select(list(partition_by)).group_by(list(partition_by)).aggregate([])
    for combo in combos.to_pylist():
        mask = None
        for col in partition_by:
            v = combo[col]
            cond = pc.is_null(table[col]) if v is None else pc.equal(table[col], v)
            cond = pc.fill_null(cond, False)
            mask = cond if mask is None else pc.and_(mask, cond)
        part = table.filter(mask).select(data_cols).combine_chunks()
        for b in part.to_batches():
            yield {c: combo[c] for c in partition_by}, b


def file_writer(
    root: str, schema: pa.Schema, partition_by: Sequence[str], unique_columns: Sequence[str] = ()
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The `mapInArrow` function writing a task's batches under `root` (see module doc).
    `unique_columns` are written without a dictionary (`DeltaTarget.unique_columns`)."""
    partition_by = list(partition_by)
    unique_columns = tuple(unique_columns)
    file_schema = pa.schema([f for f in schema if f.name not in partition_by])

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        freeze_imports()
        task = uuid.uuid4().hex
        files: dict[tuple, _OpenFile] = {}
        buffered = 0  # by every open file
        for batch in batches:
            batch = pa.RecordBatch.from_arrays(
                [batch.column(f.name).cast(f.type) for f in schema], schema=schema
            )
            for values, part in _split(batch, partition_by):
                key = tuple(partition_value(values[c]) for c in partition_by)
                f = files.get(key)
                if f is None:
                    rel_dir = "/".join(
                        f"{c}={_escape(v)}" for c, v in zip(partition_by, key, strict=True)
                    )
                    name = f"part-{len(files):05d}-{task}.{CODEC}.parquet"
                    rel = f"{rel_dir}/{name}" if rel_dir else name
                    f = files[key] = _OpenFile(
                        root,
                        rel,
                        file_schema,
                        dict(zip(partition_by, key, strict=True)),
                        unique_columns,
                    )
                buffered += f.write(part)
                if buffered >= ROW_GROUP_BYTES:
                    for other in files.values():
                        other.flush()
                    buffered = 0
        rows = [f.close() for f in files.values()]
        if rows:
            cols = list(zip(*rows, strict=True))
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(cols[0], pa.string()),
                    pa.array(cols[1], pa.int64()),
                    pa.array(cols[2], pa.string()),
                    pa.array(cols[3], pa.string()),
                    pa.array(cols[4], pa.int64()),
                ],
                names=["path", "size", "partition_values", "stats", "modification_time"],
            )

    return write
