"""The quarantine files the Arrow path writes without Spark, and the quarantine commit
that takes them beside the files Spark writes.

- the held rows (typed by Arrow, failing a `quarantine` expectation) become quarantine
  rows with the reasons and `row` of Spark's path, built in Arrow on the driver
  (`warehouse.quality.arrow_quarantine.HeldRows`) and written in a file of the
  quarantine table (`held_quarantine_files`);
- the tasks' files of known bad records and those join the quarantine's commit with the
  batch's app transaction (`commit_quarantine`).

pyarrow and pyspark are imported inside functions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import streams.storage as storage
from warehouse.write.context import BatchContext, union

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from streams.delta import FileEntry
    from warehouse.quality.arrow_quarantine import ParseErrorRows
    from warehouse.quality.arrow_rows import ArrowChecks

HELD_BLOCK = 65_536
"""Held rows read, turned into quarantine rows and written per block of this many."""


def held_quarantine_files(
    spark: SparkSession,
    staged: tuple[str, ...],
    rules: ArrowChecks,
    payload: Any,
    known: ParseErrorRows,
) -> list[FileEntry] | None:
    """The held rows' quarantine rows (`staged`, the tasks' files of them) built on the
    driver in Arrow and written in a file of the quarantine table (`known`'s root),
    uncommitted; None when only Spark builds them as its path does
    (`RowChecks.quarantined`): a payload type `writes_json` does not write, a double
    that is not finite, a timestamp outside years 1000-9999 or a session time zone other
    than UTC, a staged file this process cannot read, no JVM to write doubles."""
    import pyarrow.parquet as pq

    from streams.delta import file_entry, file_writer
    from warehouse.quality.arrow_quarantine import HeldRows
    from warehouse.quality.quarantine import java_doubles

    doubles = java_doubles(spark)
    if doubles is None or not all(storage.is_file(p) for p in staged):
        return None
    files = [pq.ParquetFile(_open_input(p)) for p in staged]
    names = [f.name for f in payload.fields]

    def blocks(columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
        # The held rows a block at a time: a batch can hold many.
        for f in files:
            yield from f.iter_batches(batch_size=HELD_BLOCK, columns=columns)

    if not _writes_exactly(spark, files[0].schema_arrow, names, blocks):
        return None
    built = HeldRows(known.root, known.schema, known.batch_id, known.at, doubles)
    rows = (built.rows(b, names, rules.failed_ids(b)) for b in blocks() if b.num_rows)
    write = file_writer(known.root, known.schema, [])
    return [file_entry(r) for out in write(rows) for r in out.to_pylist()]


def _writes_exactly(spark: Any, schema: pa.Schema, names: list[str], blocks: Any) -> bool:
    """Whether the driver writes these held rows' JSON as Spark does: every payload type
    is one it writes, every double finite, every timestamp within years 1000-9999 in a
    UTC session."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from warehouse.quality.arrow_quarantine import timestamps_in_range, writes_json

    if not all(writes_json(schema.field(n).type) for n in names):
        return False
    checked = [n for n in names if pa.types.is_floating(schema.field(n).type)]
    times = [n for n in names if pa.types.is_timestamp(schema.field(n).type)]
    if times and spark.conf.get("spark.sql.session.timeZone") not in ("UTC", "Etc/UTC"):
        return False
    if not (checked or times):
        return True
    for block in blocks(checked + times):
        if any(pc.any(pc.invert(pc.is_finite(block.column(n)))).as_py() for n in checked):
            return False
        if not all(timestamps_in_range(block.column(n)) for n in times):
            return False
    return True


def commit_quarantine(
    batch: BatchContext,
    known: list[FileEntry],
    known_rows: int,
    parts: list[DataFrame],
) -> int:
    """The quarantine's commit when quarantine files were written without Spark (`known`,
    of `known_rows` rows: the tasks' known bad records, the held rows' built on the
    driver): those files and the files Spark writes of `parts`, in one commit with the
    batch's app transaction; the rows committed. Should the quarantine table be
    partitioned (the framework makes it unpartitioned), those rows are written again by
    Spark with the rest."""
    from streams.delta import append_files, arrow_schema, write_files
    from warehouse.quality.quarantine import QUARANTINE_SCHEMA

    target = batch.program.targets.quarantine()
    schema = arrow_schema(QUARANTINE_SCHEMA)
    rows = [0]

    def write(partition_by: list[str]) -> list[FileEntry]:
        files: list[FileEntry] = []
        frames = list(parts)
        if partition_by:
            root = target.path.rstrip("/")
            frames.append(
                batch.spark.read.schema(QUARANTINE_SCHEMA).parquet(
                    *[f"{root}/{f[0]}" for f in known]
                )
            )
        else:
            files += known
            rows[0] += known_rows
        if frames:
            more = write_files(
                union(frames), target.path, schema, partition_by, target.unique_columns
            )
            rows[0] += sum(json.loads(f[3])["numRecords"] for f in more)
            files += more
        return files

    append_files(target, batch.batch_id, schema, write, commit_info=batch.info)
    return rows[0]


def _open_input(location: str) -> Any:
    """A random-access reader of the staged file at `location` (local or remote)."""
    fs, path = storage.current().filesystem(location)
    return fs.open_input_file(path)
