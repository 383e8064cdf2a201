"""The fast side of an append: Spark's own Parquet writer, Delta stats from the footers.

Handing a batch to Python (`mapInArrow`, `files.file_writer`) costs Spark a row-to-Arrow
conversion that is slow for nested columns: a null `array<struct>` (the Kafka `headers`
column) alone made a 1M-row batch 3-7x slower to write here. So when the types allow
it, the executors write with Spark's JVM Parquet writer into a staging directory under
the table root; the driver moves the files into the usual hive-style layout and builds
the add actions (size, partition values, and `numRecords`/min/max/nullCount from each
file's Parquet footer). A file moved but never committed is an orphan like any other
(`maintenance.remove_orphans`); so is a staging directory left by a killed attempt.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Sequence
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DateType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
)

import streams.storage as storage
from streams.delta.files import CODEC, HIVE_NULL, STAGING_DIR, ZSTD_LEVEL, _Stats

# Partition columns whose hive directory value *is* the Delta partition value. Others
# (timestamps, floats, decimals, binary) are formatted differently by Spark's writer and
# go through `files.file_writer`, which formats them itself.
_PLAIN_PARTITION_TYPES = (
    StringType,
    IntegerType,
    LongType,
    ShortType,
    ByteType,
    DateType,
    BooleanType,
)
_TIMESTAMP_TYPE_CONF = "spark.sql.parquet.outputTimestampType"
_CODEC_CONF = "spark.sql.parquet.compression.codec"


def supports(df: DataFrame, partition_by: Sequence[str]) -> bool:
    """Whether `df` can be written by Spark's Parquet writer with exact partition values."""
    fields = {f.name: f.dataType for f in df.schema.fields}
    return all(isinstance(fields.get(c), _PLAIN_PARTITION_TYPES) for c in partition_by)


def write_files(
    df: DataFrame,
    root: str,
    schema: pa.Schema,
    partition_by: Sequence[str],
    unique_columns: Sequence[str] = (),
) -> list[tuple[str, int, dict[str, str | None], str, int]]:
    """Write `df` as Parquet files of the table at `root`; return one
    `(path, size, partition values, stats json, mtime ms)` per file, not yet committed.

    Compressed with `files.CODEC` unless the session sets its own codec; the
    `unique_columns` present are written without a dictionary (Parquet's per-column
    `parquet.enable.dictionary#<column>`)."""
    # INT96 (Spark's default) carries no min/max in the footer and is a legacy
    # encoding; Delta readers expect INT64 microseconds.
    spark = df.sparkSession
    if spark.conf.get(_TIMESTAMP_TYPE_CONF, None) != "TIMESTAMP_MICROS":
        spark.conf.set(_TIMESTAMP_TYPE_CONF, "TIMESTAMP_MICROS")
    stage = os.path.join(root, STAGING_DIR, uuid.uuid4().hex)
    writer = df.write.mode("error").option(  # Spark Connect knows only this name of it
        "mapreduce.fileoutputcommitter.marksuccessfuljobs", "false"
    )
    if spark.conf.get(_CODEC_CONF, None) is None:
        writer = writer.option("compression", CODEC).option(
            "parquet.compression.codec.zstd.level", str(ZSTD_LEVEL)
        )
    for name in unique_columns:
        if name in df.columns:
            writer = writer.option(f"parquet.enable.dictionary#{name}", "false")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.parquet(stage)
    try:
        moved = [_move(root, stage, rel, schema, partition_by) for rel in _written(stage)]
        return [m for m in moved if m is not None]
    finally:
        storage.remove(stage)
        local = storage.local_path(os.path.dirname(stage))
        if local is not None:
            try:
                os.rmdir(local)
            except OSError:
                pass  # another attempt's directory is still there


def _written(stage: str) -> list[str]:
    """The data files of a finished write, relative to `stage`, in a stable order."""
    return sorted(
        rel
        for rel in storage.walk_files(stage)
        if rel.endswith(".parquet")
        and not any(part.startswith(("_", ".")) for part in rel.split("/"))
    )


def _move(
    root: str, stage: str, rel: str, schema: pa.Schema, partition_by: Sequence[str]
) -> tuple[str, int, dict[str, str | None], str, int] | None:
    """Move one written file into the table's layout; None (and left behind in the
    staging directory) when it holds no rows, as Spark writes for an empty batch."""
    values: dict[str, str | None] = {}
    for part in rel.split("/")[:-1]:
        col, _, raw = part.partition("=")
        values[col] = None if raw == HIVE_NULL else unquote(raw)
    missing = [c for c in partition_by if c not in values]
    if missing:
        raise RuntimeError(f"Spark wrote `{rel}` without partition directories for {missing}")
    fs, src = storage.current().filesystem(storage.join(stage, rel))
    meta = pq.read_metadata(src, filesystem=fs)
    if meta.num_rows == 0:
        return None
    stats = footer_stats(meta, schema)
    _, dst = storage.current().filesystem(storage.join(root, rel))
    if storage.is_local(root):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
    fs.move(src, dst)  # a rename on a local disk, a copy and a delete on object storage
    return rel, fs.get_file_info(dst).size, values, stats, int(time.time() * 1000)


def footer_stats(meta: pq.FileMetaData, schema: pa.Schema) -> str:
    """Delta file statistics (`numRecords`, min/max, nullCount) from a Parquet footer.

    Same rules as `files._Stats`: top-level primitive columns only; strings longer than
    32 characters, booleans, decimals and binary get a null count but no min/max;
    a floating column with NaN gets none either (Parquet writers leave such bounds
    out); timestamp maxima are rounded up to the millisecond.
    """
    stats = _Stats(schema)
    stats.rows = meta.num_rows
    columns = {
        meta.schema.column(i).path: i
        for i in range(meta.num_columns)
        if stats.kinds.get(meta.schema.column(i).path) is not None
    }
    for name in [n for n in stats.nulls if n not in columns]:
        del stats.nulls[name]  # not a top-level leaf of this file
    for name, i in columns.items():
        for g in range(meta.num_row_groups):
            st = meta.row_group(g).column(i).statistics
            if st is None or not st.has_null_count:
                stats.nulls.pop(name, None)
                stats.dropped.add(name)
                continue
            if name in stats.nulls:
                stats.nulls[name] += st.null_count
            if stats.kinds[name] == "none":
                continue
            if not st.has_min_max:
                if st.null_count != meta.row_group(g).num_rows:
                    stats.dropped.add(name)  # values without bounds: no min/max is honest
                continue
            if st.min != st.min or st.max != st.max:  # NaN bounds order nothing
                stats.dropped.add(name)
                continue
            stats.bound(name, st.min, st.max)
    return stats.to_json()
